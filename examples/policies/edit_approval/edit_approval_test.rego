package toolgate.edit_approval_test

import data.toolgate.edit_approval

edit(requests) := {"tool": "docs_edit", "arguments": {"doc_id": "d1", "requests": requests}}

insert := {"insertText": {"text": "the secret text", "index": 1}}

test_deletion_asks_approval if {
	a := edit_approval.approval with input as edit([insert, {"deleteRange": {"startIndex": 3, "endIndex": 8}}])
	a.effect == "deletes 5 characters from document d1 in 1 of 2 edits"
	a.summary == {"doc_id": "d1", "edits": 2, "deletions": 1, "characters": 5}
}

test_summary_shows_no_text if {
	a := edit_approval.approval with input as edit([insert, {"deleteRange": {"startIndex": 3, "endIndex": 8}}])
	not contains(json.marshal(a), "secret")
}

test_insert_only_asks_nothing if {
	not edit_approval.approval with input as edit([insert])
}

test_other_tools_ask_nothing if {
	not edit_approval.approval with input as {"tool": "pubmed_search", "arguments": {"term": "x", "requests": [{"deleteRange": {}}]}}
}

test_malformed_deletion_still_asks if {
	a := edit_approval.approval with input as {"tool": "docs_edit", "arguments": {"requests": [{"deleteRange": null}]}}
	a.summary == {"doc_id": "(none)", "edits": 1, "deletions": 1, "characters": 0}
}

test_odd_numbers_still_ask if {
	a := edit_approval.approval with input as edit([{"deleteRange": {"startIndex": 1.5, "endIndex": 3}}])
	a.effect == "deletes 1.5 characters from document d1 in 1 of 1 edits"
}

test_reversed_range_denied if {
	edit_approval.deny == {{"msg": "deleteRange must end after it starts", "path": "/requests/1/deleteRange/endIndex"}} with input as edit([insert, {"deleteRange": {"startIndex": 8, "endIndex": 3}}])
}

test_empty_range_denied if {
	count(edit_approval.deny) == 1 with input as edit([{"deleteRange": {"startIndex": 4, "endIndex": 4}}])
}

test_good_edits_not_denied if {
	count(edit_approval.deny) == 0 with input as edit([insert, {"deleteRange": {"startIndex": 3, "endIndex": 8}}])
}
