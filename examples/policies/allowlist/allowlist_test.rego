package toolgate.allowlist_test

import data.toolgate.allowlist

test_known_organism_allowed if {
	count(allowlist.deny) == 0 with input as {"tool": "drug_targets", "arguments": {"query": "EGFR", "organism": "human"}}
}

test_unknown_organism_denied if {
	some d in allowlist.deny with input as {"tool": "drug_targets", "arguments": {"organism": "yeast"}}
	d.path == "/organism"
}

test_unlisted_document_denied if {
	some d in allowlist.deny with input as {"tool": "docs_edit", "arguments": {"doc_id": "d-9"}}
	d.path == "/doc_id"
}

test_listed_document_allowed if {
	count(allowlist.deny) == 0 with input as {"tool": "docs_edit", "arguments": {"doc_id": "d-1"}}
}

# The caller's agent header decides nothing: any agent, or none, gets the
# same answer for the same arguments.
test_agent_does_not_matter if {
	count(allowlist.deny) == 1 with input as {"tool": "docs_edit", "arguments": {"doc_id": "d-9"}, "caller": {"agent": "writer-agent"}}
	count(allowlist.deny) == 0 with input as {"tool": "docs_edit", "arguments": {"doc_id": "d-1"}, "caller": {"agent": "anyone"}}
}
