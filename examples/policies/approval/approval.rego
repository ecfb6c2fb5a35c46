# A mutating tool needs an approval: the caller must send X-Approved-By
# naming who approved the edit (an allow-listed header, see the config).
package toolgate.approval

mutating := {"docs_edit"}

deny contains {"msg": "document edits need an X-Approved-By header naming who approved them", "path": ""} if {
	input.tool in mutating
	approver := object.get(input.request.headers, "x-approved-by", "")
	trim_space(approver) == ""
}
