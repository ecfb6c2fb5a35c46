package egress_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/proxy/egress"
)

// BenchmarkGuardCheck is the guard's own cost per new upstream connection
// (the lookup itself excluded: the resolver answers from memory). Pooled
// connections pay nothing.
func BenchmarkGuardCheck(b *testing.B) {
	cfg := egress.Config{Allow: []string{"10.20.0.0/16", "db.internal:5432", "*.svc.cluster.local"}}
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	res := newResolver(map[string][]string{"api.example.com": {"93.184.215.14,2606:2800:21f:cb07:6820:80da:af6b:8b2c"}})
	g, err := egress.New(&cfg, egress.Options{Resolver: res, ToolHosts: []string{"localhost:8080", "tools.example.com"}})
	if err != nil {
		b.Fatal(err)
	}
	for _, host := range []string{"8.8.8.8", "api.example.com", "tools.example.com"} {
		b.Run(host, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := g.Check(context.Background(), host, "443"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestGuardConcurrent checks many destinations at once through one guard
// (run with -race).
func TestGuardConcurrent(t *testing.T) {
	res := newResolver(map[string][]string{"a.test": {"8.8.8.8"}, "b.test": {"10.0.0.1"}})
	g := guard(t, egress.Config{Allow: []string{"10.0.0.0/8"}}, res, &dialer{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				host := []string{"a.test", "b.test", "169.254.169.254"}[(i+j)%3]
				_, err := g.Check(context.Background(), host, "80")
				if (err != nil) != (host == "169.254.169.254") {
					errs <- fmt.Errorf("Check(%s) = %v", host, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
