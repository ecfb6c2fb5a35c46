# A mutating tool needs an approval on record: the caller must send
# X-Approved-By naming who approved the edit (an allow-listed header, see
# the config), and the event records the call. The calling process sets the
# header freely, so this rule authenticates no one and grants nothing by
# itself: it makes the caller state an approver. Which documents may be
# edited at all is decided on the arguments (the allowlist policy).
package toolgate.approval

mutating := {"docs_edit"}

deny contains {"msg": "document edits need an X-Approved-By header naming who approved them", "path": ""} if {
	input.tool in mutating
	approver := object.get(input.request.headers, "x-approved-by", "")
	trim_space(approver) == ""
}
