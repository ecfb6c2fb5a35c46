package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestToolsImportOpenAPIPassesPolicyCheck runs `toolgate tools import
// openapi` on the pinned Petstore and `toolgate policy check` on what it
// wrote: the imported configuration loads as `toolgate run` loads it.
func TestToolsImportOpenAPIPassesPolicyCheck(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "petstore-tools.yaml")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"tools", "import", "openapi", "../../examples/openapi/petstore.yaml", "-o", out}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("import: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "16 operations imported, 3 refused") {
		t.Errorf("import report:\n%s", stdout.String())
	}
	stdout.Reset()
	stderr.Reset()
	code = run(context.Background(), []string{"policy", "check", "--config", out}, &stdout, &stderr)
	if code != exitOK || !strings.HasPrefix(stdout.String(), "ok: 16 tools") {
		t.Errorf("policy check: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	// Usage errors exit 2; a document that is not OpenAPI exits 1.
	if code := run(context.Background(), []string{"tools", "import", "openapi"}, &stdout, &stderr); code != exitUsage {
		t.Errorf("no document: exit %d, want %d", code, exitUsage)
	}
	if code := run(context.Background(), []string{"tools", "import", "openapi", "../../go.mod"}, &stdout, &stderr); code != exitError {
		t.Errorf("go.mod as a document: exit %d, want %d", code, exitError)
	}
}
