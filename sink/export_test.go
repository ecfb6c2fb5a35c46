package sink

// SetBeforeSend makes c run f between preparing an insert and sending it,
// so a fault test can lose the acknowledgement of exactly that insert.
func SetBeforeSend(c *ClickHouse, f func()) { c.beforeSend = f }
