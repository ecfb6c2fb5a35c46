# Document edits (the docs_edit tool). An edit that deletes text waits for
# a person's approval (docs/approvals.md); an edit that only inserts text
# does not. The Approvals page shows the document and how many edits,
# deletions and deleted characters the call makes: never the text being
# inserted, nor anything else of the arguments. The grant is bound to these
# exact arguments, this agent and this session: a changed call asks anew.
#
# A deletion whose range ends where it starts, or before, is refused
# outright: a schema cannot compare two fields, a policy can.
package toolgate.edit_approval

edits := e if {
	e := input.arguments.requests
	is_array(e)
} else := []

# A deletion is any edit that names deleteRange, whatever its value: a
# malformed one still asks (fail closed).
deletions := [r.deleteRange |
	some r in edits
	is_object(r)
	"deleteRange" in object.keys(r)
]

deny contains {"msg": "deleteRange must end after it starts", "path": sprintf("/requests/%d/deleteRange/endIndex", [i])} if {
	input.tool == "docs_edit"
	some i, r in edits
	r.deleteRange.endIndex <= r.deleteRange.startIndex
}

approval := {
	"effect": sprintf("deletes %v characters from document %v in %d of %d edits", [characters, doc, count(deletions), count(edits)]),
	"summary": {"doc_id": doc, "edits": count(edits), "deletions": count(deletions), "characters": characters},
} if {
	input.tool == "docs_edit"
	count(deletions) > 0
}

doc := object.get(input.arguments, "doc_id", "(none)")

characters := sum([n |
	some d in deletions
	is_number(d.startIndex)
	is_number(d.endIndex)
	n := d.endIndex - d.startIndex
])
