package bucketing

// ReasonEgressDenied (policy): the egress guard refused a destination no
// tool names because it is, or resolves to, a loopback, private,
// link-local, metadata or other non-public address that egress.allow does
// not list (proxy/egress, docs/security.md).
const ReasonEgressDenied = "egress_denied"
