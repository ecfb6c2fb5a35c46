package testutil

import (
	"fmt"
	"os"
	"testing"
)

// Missing reports a test dependency that is not installed (node, an npm
// package): the test is skipped on a developer's machine, with how to
// install it, and fails under CI (CI set), where `make test` installs
// every dependency first, so a suite that lost one never passes by
// skipping what it should have run.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") != "" {
		t.Fatalf("%s (CI is set: every test dependency must be installed)", msg)
	}
	t.Skip("skipped: " + msg)
}
