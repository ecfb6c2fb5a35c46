// Package steps holds the request and answer steps of a plain HTTP tool's
// chain, each with a builder that returns nil for a tool without it:
// steps.go has the request steps in requestOrder's order (extract, schema,
// policies, approval, origin, budget) and observe.go the observe step;
// extract.go reads a call's arguments from its path, query and body,
// approval.go asks the approver and fills what a grant binds, budget.go
// admits and settles a call against the budgets; answer.go orders the
// answer steps (answer_schema.go, answer_detect.go, answer_policy.go).
// proxy's requestOrder and BuildAnswerSteps compile them into a chain;
// mcpcall reuses the schema check, approval and budget admission.
package steps
