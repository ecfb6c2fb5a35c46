# A mutating tool needs an approval on record: the caller must send
# X-Approved-By naming who approved the edit (an allow-listed header, see
# the config), and the event records the call. The calling process sets the
# header freely, so this rule authenticates no one and grants nothing by
# itself: it makes the caller state an approver. Which documents may be
# edited at all is decided on the arguments (the allowlist policy).
#
# Superseded: the caller sets the header, so any caller can name any
# approver. A policy that needs a person's approval asks for it with
# `approval` (see edit_approval and docs/approvals.md); toolgate then holds
# the call until a person decides, outside the caller's reach. This example
# stays until the example configuration, its case file and the demo move
# to edit_approval.
package toolgate.approval

mutating := {"docs_edit"}

deny contains {"msg": "document edits need an X-Approved-By header naming who approved them", "path": ""} if {
	input.tool in mutating
	approver := object.get(input.request.headers, "x-approved-by", "")
	trim_space(approver) == ""
}
