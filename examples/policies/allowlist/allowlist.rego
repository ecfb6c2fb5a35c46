# An allow-list of values: drug-target searches only for these organisms,
# and only these agents may call the document editor at all.
package toolgate.allowlist

organisms := {"human", "mouse", "rat"}

editors := {"writer-agent", "review-agent"}

deny contains {"msg": sprintf("organism must be one of %v", [sort(organisms)]), "path": "/organism"} if {
	input.tool == "drug_targets"
	org := input.arguments.organism
	not org in organisms
}

deny contains sprintf("agent %q may not edit documents", [input.caller.agent]) if {
	input.tool == "docs_edit"
	not input.caller.agent in editors
}
