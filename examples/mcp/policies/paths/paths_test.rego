package toolgate.paths_test

import data.toolgate.paths

test_etc_denied if {
	some d in paths.deny with input as {"protocol": "mcp", "tool": "read_file", "arguments": {"path": "/etc/passwd"}}
	d.path == "/path"
}

test_home_allowed if {
	count(paths.deny) == 0 with input as {"protocol": "mcp", "tool": "read_file", "arguments": {"path": "/home/a/notes.txt"}}
}
