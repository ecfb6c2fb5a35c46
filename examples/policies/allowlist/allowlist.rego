# An allow-list of values the call itself carries: drug-target searches only
# for these organisms, document edits only to these documents. Both are
# arguments: toolgate checked them, and they go upstream exactly as checked.
#
# Do not allow-list callers by input.caller.agent or by a request header: the
# calling process sets those freely, so a list of agent names keeps no one
# out (see "Who controls what" in docs/policies.md).
package toolgate.allowlist

organisms := {"human", "mouse", "rat"}

editable_documents := {"d-1", "d-2", "d-3"}

deny contains {"msg": sprintf("organism must be one of %v", [sort(organisms)]), "path": "/organism"} if {
	input.tool == "drug_targets"
	org := input.arguments.organism
	not org in organisms
}

deny contains {"msg": "doc_id is not one of the documents agents may edit", "path": "/doc_id"} if {
	input.tool == "docs_edit"
	not input.arguments.doc_id in editable_documents
}
