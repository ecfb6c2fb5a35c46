package clickhouse

// SetBeforeSend makes c run f between preparing an insert and sending it,
// so a fault test can lose the acknowledgement of exactly that insert.
func SetBeforeSend(c *Writer, f func()) { c.beforeSend = f }

// SetUntil makes c's Migrate stop after migration version v (0: all), so
// a test can build a database as an older toolgate left it.
func SetUntil(c *Writer, v int) { c.until = v }

// SetBeforeMigration makes c's Migrate run f before the statements of each
// migration it applies.
func SetBeforeMigration(c *Writer, f func(version int)) { c.beforeMigration = f }
