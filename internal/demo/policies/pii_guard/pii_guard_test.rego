package toolgate.pii_guard_test

import data.toolgate.pii_guard

test_plain_query_allowed if {
	count(pii_guard.deny) == 0 with input as {"arguments": {"term": "EGFR inhibitors 2024"}}
}

test_email_denied if {
	some d in pii_guard.deny with input as {"arguments": {"term": "results for jane.doe@example.org"}}
	d.path == "/term"
	not contains(d.msg, "jane")
}

test_phone_denied if {
	count(pii_guard.deny) == 1 with input as {"arguments": {"query": "call +1 (555) 010-9999 about it"}}
}

test_numbers_in_text_allowed if {
	count(pii_guard.deny) == 0 with input as {"arguments": {"query": "IC50 below 10 nM in 2023"}}
}
