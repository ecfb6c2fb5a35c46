# Bounds on numeric arguments: no tool may ask for more than 100 results.
package toolgate.bounds

max_results := 100

# The argument names that mean "how many results".
count_args := {"retmax", "limit", "max_results", "page_size"}

deny contains {"msg": sprintf("%s must be at most %d", [name, max_results]), "path": concat("", ["/", name]), "code": "validation"} if {
	some name in count_args
	n := as_number(input.arguments[name])
	n > max_results
}

# A tool without a schema passes query, form and path values as strings
# ("500"), so a bound reads numeric strings too: otherwise ?retmax=500
# would walk around it.
as_number(v) := v if is_number(v)

as_number(v) := to_number(v) if {
	is_string(v)
	regex.match(`^-?[0-9]+(\.[0-9]+)?$`, v)
}
