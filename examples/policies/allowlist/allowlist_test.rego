package toolgate.allowlist_test

import data.toolgate.allowlist

test_known_organism_allowed if {
	count(allowlist.deny) == 0 with input as {"tool": "drug_targets", "arguments": {"query": "EGFR", "organism": "human"}, "caller": {"agent": "x"}}
}

test_unknown_organism_denied if {
	some d in allowlist.deny with input as {"tool": "drug_targets", "arguments": {"organism": "yeast"}, "caller": {"agent": "x"}}
	d.path == "/organism"
}

test_unknown_editor_denied if {
	count(allowlist.deny) == 1 with input as {"tool": "docs_edit", "arguments": {}, "caller": {"agent": "random-agent"}}
}

test_known_editor_allowed if {
	count(allowlist.deny) == 0 with input as {"tool": "docs_edit", "arguments": {}, "caller": {"agent": "writer-agent"}}
}
