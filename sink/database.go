package sink

import (
	"fmt"
	"strings"
	"unicode"
)

// MaxDatabaseNameBytes bounds a ClickHouse database name (events.clickhouse.database,
// the dashboard's database, `toolgate schema print --database`).
const MaxDatabaseNameBytes = 128

// CheckDatabaseName reports whether name is a plain ClickHouse database
// name, the one rule for every place that takes one: 1 to
// MaxDatabaseNameBytes bytes, with no backquote, backslash, space, dot or
// control character, so that it can be quoted as an identifier in SQL
// without escaping. Defaults are applied before: "" is not a name.
func CheckDatabaseName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%q is not a plain database name: it is empty", name)
	case len(name) > MaxDatabaseNameBytes:
		return fmt.Errorf("%q is not a plain database name: longer than %d bytes", name, MaxDatabaseNameBytes)
	case strings.ContainsAny(name, "`\\ ."), strings.IndexFunc(name, unicode.IsControl) >= 0:
		return fmt.Errorf("%q is not a plain database name: no backquote, backslash, space, dot or control character", name)
	}
	return nil
}
