package sink_test

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/sink"
)

func TestCheckDatabaseName(t *testing.T) {
	tests := []struct {
		name string
		db   string
		ok   bool
	}{
		{"default", "toolgate", true},
		{"underscore and digits", "tg_events_2", true},
		{"unicode letters", "événements", true},
		{"longest", strings.Repeat("a", sink.MaxDatabaseNameBytes), true},
		{"empty", "", false},
		{"too long", strings.Repeat("a", sink.MaxDatabaseNameBytes+1), false},
		{"backquote", "a`b", false},
		{"backslash", `a\b`, false},
		{"space", "a b", false},
		{"dot", "a.b", false},
		{"newline", "a\nb", false},
		{"NUL", "a\x00b", false},
		{"DEL", "a\x7fb", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := sink.CheckDatabaseName(tc.db)
			if (err == nil) != tc.ok {
				t.Errorf("CheckDatabaseName(%q) = %v, want ok=%v", tc.db, err, tc.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "is not a plain database name") {
				t.Errorf("error %q does not say the name is not plain", err)
			}
		})
	}
}

// FuzzCheckDatabaseName checks that every name CheckDatabaseName accepts
// can be quoted as an identifier with backquotes and nothing else.
func FuzzCheckDatabaseName(f *testing.F) {
	for _, s := range []string{"toolgate", "", "a`b", "a.b", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if sink.CheckDatabaseName(name) != nil {
			return
		}
		if name == "" || len(name) > sink.MaxDatabaseNameBytes || strings.ContainsAny(name, "`\\ .\n\r\t\x00") {
			t.Errorf("accepted %q", name)
		}
	})
}
