# Every document edit waits for a person's approval (docs/approvals.md).
# The Approvals page shows the document and how many edits the call makes:
# never the text being inserted. The grant is bound to these exact
# arguments, this agent and this session; a changed call asks anew.
package toolgate.edit_approval

approval := {
	"effect": sprintf("edits document %s", [input.arguments.doc_id]),
	"summary": {"doc_id": input.arguments.doc_id, "edits": count(input.arguments.requests)},
} if input.tool == "docs_edit"
