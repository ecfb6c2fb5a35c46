package toolgate.approval_test

import data.toolgate.approval

test_edit_without_approval_denied if {
	count(approval.deny) == 1 with input as {"tool": "docs_edit", "request": {"headers": {}}}
}

test_edit_with_blank_approval_denied if {
	count(approval.deny) == 1 with input as {"tool": "docs_edit", "request": {"headers": {"x-approved-by": "  "}}}
}

test_edit_with_approval_allowed if {
	count(approval.deny) == 0 with input as {"tool": "docs_edit", "request": {"headers": {"x-approved-by": "dana@lab"}}}
}

test_read_tools_need_nothing if {
	count(approval.deny) == 0 with input as {"tool": "pubmed_search", "request": {"headers": {}}}
}
