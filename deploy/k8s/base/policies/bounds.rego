# Bounds on numeric arguments: no tool may ask for more than 100 results.
package toolgate.bounds

max_results := 100

# The argument names that mean "how many results".
count_args := {"retmax", "limit", "max_results", "page_size"}

deny contains {"msg": sprintf("%s must be at most %d", [name, max_results]), "path": concat("", ["/", name]), "code": "validation"} if {
	some name in count_args
	n := input.arguments[name]
	is_number(n)
	n > max_results
}
