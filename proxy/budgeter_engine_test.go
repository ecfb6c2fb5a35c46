package proxy

import (
	"github.com/toolgate/toolgate/policies/budget"
	"github.com/toolgate/toolgate/proxy/internal/budgettest"
)

// EngineBudgeter is the budget engine as proxy's Budgeter, for proxy_test's
// tests that run the real engine.
func EngineBudgeter(e *budget.Engine) Budgeter { return budgettest.Engine(e) }
