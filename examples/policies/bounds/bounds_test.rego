package toolgate.bounds_test

import data.toolgate.bounds

test_within_bounds_allowed if {
	count(bounds.deny) == 0 with input as {"tool": "pubmed_search", "arguments": {"term": "x", "retmax": 100}}
}

test_over_bounds_denied if {
	some d in bounds.deny with input as {"tool": "pubmed_search", "arguments": {"term": "x", "retmax": 101}}
	d.path == "/retmax"
	d.code == "validation"
}

test_other_count_names_checked if {
	count(bounds.deny) == 1 with input as {"tool": "drug_targets", "arguments": {"limit": 500}}
}

test_numeric_string_denied if {
	some d in bounds.deny with input as {"tool": "pubmed_search", "arguments": {"term": "x", "retmax": "500"}}
	d.path == "/retmax"
}

test_other_string_ignored if {
	count(bounds.deny) == 0 with input as {"tool": "pubmed_search", "arguments": {"term": "x", "retmax": "many"}}
}
