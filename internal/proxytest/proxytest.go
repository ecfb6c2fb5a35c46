// Package proxytest starts a real toolgate proxy (proxy.Server on real
// listeners, its events in an NDJSON file) for the tests of packages that
// run one beside what they test. Tests of package proxy itself have
// their own harness; this one is for the others.
package proxytest

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/sink"
)

// Start decodes cfgYAML strictly (known fields only), validates it with dir
// as its folder, and serves it until the test ends, its events written to
// dir/events.ndjson. opts may set any Option but the Recorder.
func Start(t testing.TB, cfgYAML, dir string, opts proxy.Options) *proxy.Server {
	t.Helper()
	var cfg proxy.Config
	dec := yaml.NewDecoder(strings.NewReader(cfgYAML))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(dir); err != nil {
		t.Fatal(err)
	}
	f, err := sink.OpenFile(sink.FileConfig{Path: filepath.Join(dir, "events.ndjson")})
	if err != nil {
		t.Fatal(err)
	}
	q, err := sink.NewQueue(f, sink.QueueConfig{FlushInterval: 10 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts.Recorder = q
	if opts.Sidecar == "" {
		opts.Sidecar = "test"
	}
	ps, err := proxy.New(proxy.Snapshot{Config: &cfg, Version: "test"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := ps.Listen(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ps.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ps.Shutdown(ctx)
		<-done
		q.Close(ctx)
		f.Close()
	})
	return ps
}
