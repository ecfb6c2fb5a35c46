# Host builtins for the differential test (diff_test.go): OPA's WASM
# runtime leaves sprintf, units.*, net.cidr_*, time.* and others to the
# host, which runs OPA's Go implementations.
package toolgate.hostbuiltins

# sprintf of strings (unicode, quotes, control characters), numbers of
# every shape, sets and objects: its arguments cross into Go as Rego
# values, sets staying sets.
deny contains sprintf("query %s is %d bytes", [input.arguments.query, count(input.arguments.query)]) if {
	count(input.arguments.query) > 8
}

deny contains sprintf("limit %v over %v", [input.arguments.limit, {"max": 40, "tags": {t | some t in input.arguments.tags}}]) if {
	input.arguments.limit > 40
}

# units.parse_bytes fails on anything but a size: with strict builtin
# errors the call fails, in the interpreter and on the wasm engine alike.
deny contains "too large" if {
	units.parse_bytes(input.arguments.a.b.c.d) > 1024
}

# A set back from the host: net.cidr_expand.
deny contains "too many hosts" if {
	count(input.arguments.ids) > count(net.cidr_expand("10.0.0.0/30")) + 12
}

# sprintf of a set and of an object with the filters' values.
inject["X-Filters"] := sprintf("%v", [{k | some k, _ in input.arguments.filters}]) if {
	count(input.arguments.filters) > 0
}

inject["X-Note"] := sprintf("%s/%v", [input.caller.agent, input.arguments.title]) if {
	input.arguments.title
}

# time: now (the same reading throughout one evaluation) and a parse.
inject["X-Clock"] := "ok" if {
	time.now_ns() == time.now_ns()
	time.now_ns() > time.parse_rfc3339_ns("2020-01-01T00:00:00Z")
}

inject["X-Size"] := format_int(units.parse_bytes("2KiB"), 10)

inject["X-Net"] := "in" if net.cidr_contains("10.0.0.0/8", "10.1.2.3")

# A builtin that is undefined rather than failing: a helper returning
# nothing for some inputs.
inject["X-Organism"] := upper(input.arguments.organism) if {
	strings.count(input.arguments.organism, "a") > 0
}
