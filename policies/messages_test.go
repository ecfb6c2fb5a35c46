package policies_test

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/policies"
)

// TestUnknownPolicyNameWithNoneDefined checks that binding a policy name
// when no policy is defined says so, rather than listing nothing.
func TestUnknownPolicyNameWithNoneDefined(t *testing.T) {
	_, err := policies.Config{Global: []string{"q"}}.Load(t.TempDir(), policies.LoadOptions{})
	if err == nil {
		t.Fatal("Load accepted a global policy that is not defined")
	}
	want := `no policy named "q"; none is defined (policies.rego, policies.wasm)`
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error = %q, want it to contain %q", err, want)
	}
}
