package approval_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/approval"
)

// BenchmarkApproveNotNeeded is the approval step on a call that needs no
// approval (no policy asked, the tool requires none): the cost every
// other call pays.
func BenchmarkApproveNotNeeded(b *testing.B) {
	cfg := approval.Config{Tools: map[string]approval.ToolRule{"docs_edit": {Require: approval.RequireAlways}}}
	if err := cfg.Validate(b.TempDir(), false); err != nil {
		b.Fatal(err)
	}
	g := approval.New(cfg, approval.NewFileStore(filepath.Join(b.TempDir(), "a.ndjson"), time.Hour), "b")
	q := &policies.ApprovalCall{Tool: "pubmed_search", Arguments: map[string]any{"term": "x"}, Agent: "a", Session: "s"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if out := g.Approve(ctx, q); out.State != policies.ApprovalNone {
			b.Fatal(out.State)
		}
	}
}
