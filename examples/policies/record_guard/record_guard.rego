# An answer policy (a tool's answer.policies): it decides what upstream
# answered, input.answer, beside the call. A record that holds a social
# security number is withheld; e-mail addresses and card numbers are
# redacted; a record of another owner than the one asked for is withheld.
# Member names in input.answer.body are in lower case, as a reader that
# ignores case reads them, so the names here are too. The messages are the
# policy's own words: they never quote the answer.
package toolgate.record_guard

withhold contains "the answer holds a social security number" if input.answer.body.ssn

withhold contains "the answer is about another owner than the one asked for" if {
	input.arguments.owner
	input.answer.body.owner != input.arguments.owner
}

redact contains "/email" if input.answer.body.email

redact contains sprintf("/items/%d/card", [i]) if {
	some i, item in input.answer.body.items
	item.card
}
