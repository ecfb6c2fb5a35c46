//go:build !linux

package fsync_test

import (
	"os"
	"testing"
)

func residentAfterDontNeed(t *testing.T, _ *os.File, _ int) int {
	t.Skip("needs Linux")
	return 0
}
