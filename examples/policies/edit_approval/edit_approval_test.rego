package toolgate.edit_approval_test

import data.toolgate.edit_approval

test_edit_asks_approval if {
	a := edit_approval.approval with input as {"tool": "docs_edit", "arguments": {"doc_id": "d1", "requests": [{"insertText": {"text": "secret", "index": 1}}]}}
	a.effect == "edits document d1"
	a.summary == {"doc_id": "d1", "edits": 1}
}

test_other_tools_ask_nothing if {
	not edit_approval.approval with input as {"tool": "pubmed_search", "arguments": {"term": "x"}}
}
