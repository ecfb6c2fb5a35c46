# A 5-rule policy of the kinds platform teams write: a bound, an allow-list,
# a PII pattern, a size limit and an injection. The Rego and proxy
# benchmarks both decide with it.
package bench.policy
organisms := {"human", "mouse", "rat"}
deny contains {"msg": "limit must be at most 50", "path": "/limit"} if input.arguments.limit > 50
deny contains {"msg": "organism not allowed", "path": "/organism"} if not input.arguments.organism in organisms
deny contains {"msg": "query holds an e-mail address", "path": "/query"} if regex.match("[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]{2,}", input.arguments.query)
deny contains "too many ids" if count(input.arguments.ids) > 20
inject["X-Trace-Id"] := input.trace_id
