package toolgate.session_inject_test

import data.toolgate.session_inject

test_session_injected if {
	session_inject.inject["X-Session-Id"] == "s-1" with input as {"caller": {"session": "s-1"}, "trace_id": "t"}
}

test_no_session_no_header if {
	not session_inject.inject["X-Session-Id"] with input as {"caller": {"session": ""}, "trace_id": "t"}
}
