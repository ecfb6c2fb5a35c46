package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/policies/approval"
)

// TestApprovalsInBand reads the in-band fields of the approvals section
// from a file, as `toolgate run` and `toolgate approvals` do: in_band for
// the section and per tool, state_key_env, and the error that names the
// field when the key is too short.
func TestApprovalsInBand(t *testing.T) {
	t.Setenv("TG_TEST_STATE_KEY", strings.Repeat("k", 32))
	dir := t.TempDir()
	path := filepath.Join(dir, "toolgate.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`approvals:
  url: http://127.0.0.1:18091/approvals
  in_band: off
  state_key_env: TG_TEST_STATE_KEY
  tools:
    charge: {require: destructive, in_band: auto}
`)
	_, ac, err := LoadApprovals(path)
	if err != nil {
		t.Fatal(err)
	}
	if ac.InBand != approval.InBandOff || ac.Tools["charge"].InBand != approval.InBandAuto || ac.StateKeyEnv != "TG_TEST_STATE_KEY" {
		t.Fatalf("approvals %+v", ac)
	}
	t.Setenv("TG_TEST_STATE_KEY", "short")
	if _, _, err := LoadApprovals(path); err == nil || !strings.Contains(err.Error(), "approvals.state_key_env") {
		t.Fatalf("a short key: %v", err)
	}
}
