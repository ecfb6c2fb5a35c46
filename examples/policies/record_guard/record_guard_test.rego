package toolgate.record_guard_test

import data.toolgate.record_guard

test_clean_record_passes if {
	count(record_guard.withhold) == 0 with input as {"arguments": {}, "answer": {"status": 200, "body": {"owner": "ada", "name": "Ada"}}}
	count(record_guard.redact) == 0 with input as {"arguments": {}, "answer": {"status": 200, "body": {"owner": "ada", "name": "Ada"}}}
}

test_ssn_withheld if {
	count(record_guard.withhold) == 1 with input as {"arguments": {}, "answer": {"status": 200, "body": {"ssn": "078-05-1120"}}}
}

test_other_owner_withheld if {
	count(record_guard.withhold) == 1 with input as {"arguments": {"owner": "ada"}, "answer": {"status": 200, "body": {"owner": "bob"}}}
}

test_email_and_card_redacted if {
	record_guard.redact == {"/email", "/items/0/card"} with input as {"arguments": {}, "answer": {"status": 200, "body": {
		"email": "ada@example.org",
		"items": [{"sku": "A1", "card": "4111 1111 1111 1111"}, {"sku": "B2"}],
	}}}
}

test_text_answer_passes if {
	count(record_guard.withhold) == 0 with input as {"arguments": {}, "answer": {"status": 200, "body": "a text answer"}}
}
