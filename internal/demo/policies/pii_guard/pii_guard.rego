# A PII guard: free-text query arguments must not carry e-mail addresses or
# phone numbers. The message names the argument, never the value.
package toolgate.pii_guard

free_text := {"term", "query", "q", "text"}

email := `[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}`

phone := `(\+?[0-9][0-9 ().-]{7,}[0-9])`

deny contains {"msg": sprintf("%s looks like it holds an e-mail address", [name]), "path": concat("", ["/", name])} if {
	some name in free_text
	regex.match(email, input.arguments[name])
}

deny contains {"msg": sprintf("%s looks like it holds a phone number", [name]), "path": concat("", ["/", name])} if {
	some name in free_text
	regex.match(phone, input.arguments[name])
}
