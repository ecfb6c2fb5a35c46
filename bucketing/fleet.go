package bucketing

// ReasonLimitUnavailable (rate_limit): a budget, loop rule or upstream
// rate kept in the fleet's Redis (state.redis) could not be checked, and
// its on_unavailable is deny; retry after retry_after_ms
// (docs/budgets.md).
const ReasonLimitUnavailable = "limit_unavailable"
