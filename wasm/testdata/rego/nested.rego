# A policy that reads nested and unicode input: the differential test
# decides with it through the interpreter and as compiled WASM.
package nested.policy

default allow := true

allow := false if input.caller.agent == "blocked-agent"

# Rune counts, not bytes: "日本語" is 3 long.
deny contains {"msg": "title longer than 8 characters", "path": "/title"} if {
	is_string(input.arguments.title)
	count(input.arguments.title) > 8
}

deny contains {"msg": "title must not start with an upper-case X", "path": "/title"} if {
	is_string(input.arguments.title)
	startswith(input.arguments.title, "X")
}

deny contains {"msg": "note mentions ünïcode", "path": "/note"} if {
	is_string(input.arguments.note)
	contains(lower(input.arguments.note), "ünïcode")
}

deny contains {"msg": "note holds an emoji", "path": "/note", "code": "validation"} if {
	is_string(input.arguments.note)
	regex.match(`[\x{1F300}-\x{1FAFF}]`, input.arguments.note)
}

deny contains {"msg": concat("", ["filter ", k, " is negative"]), "path": concat("/", ["", "filters", k])} if {
	some k, v in input.arguments.filters
	is_number(v)
	v < 0
}

deny contains {"msg": "a nested item has no id", "path": "/items"} if {
	some item in input.arguments.items
	is_object(item)
	not item.id
}

deny contains "too deep" if input.arguments.a.b.c.d == "deep"

deny contains {"msg": "tags repeat", "path": "/tags"} if {
	is_array(input.arguments.tags)
	count({t | some t in input.arguments.tags}) != count(input.arguments.tags)
}

inject["X-Agent"] := input.caller.agent if input.caller.agent != ""

inject["X-Title-Upper"] := upper(input.arguments.title) if is_string(input.arguments.title)
