package clickhouse

// SetBeforeSend makes c run f between preparing an insert and sending it,
// so a fault test can lose the acknowledgement of exactly that insert.
func SetBeforeSend(c *Writer, f func()) { c.beforeSend = f }
