package proxy_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/sink"
	"github.com/toolgate/toolgate/sink/tracing"
)

// BenchmarkTracing compares proxied calls on the validated route with
// tracing off, on with every call sampled, and on with the caller's span
// not sampled, one sub-benchmark after the other in each round: run it
// with -count N to pair them. Each call carries a caller's traceparent.
// Spans go over real HTTP to a loopback collector that reads and discards
// each export (a decoding receiver would add its own decoding to the
// process's CPU time). It reports p50 and p99 latency and the process's
// CPU time per call.
func BenchmarkTracing(b *testing.B) {
	for _, mode := range []string{"off", "on", "unsampled"} {
		b.Run(mode, func(b *testing.B) {
			var tr proxy.Tracer
			flags = "01"
			if mode == "unsampled" {
				flags = "00"
			}
			if mode != "off" {
				col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					io.Copy(io.Discard, r.Body)
					w.Header().Set("Content-Type", "application/x-protobuf")
				}))
				b.Cleanup(col.Close)
				c := tracing.Config{Endpoint: col.URL}
				if err := c.Validate(); err != nil {
					b.Fatal(err)
				}
				exp, err := tracing.New(c, tracing.Options{Sidecar: "bench"})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { exp.Shutdown(context.Background()) })
				tr = exp
			}
			up, srv := tracedServer(b, tr)
			c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: srv.Addr("forward", 0)})}}
			for range 50 { // warm the connections
				if err := benchTracedCall(c, up); err != nil {
					b.Fatal(err)
				}
			}
			lat := make([]time.Duration, 0, b.N)
			cpu0 := cpuTime()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				if err := benchTracedCall(c, up); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			cpu := cpuTime() - cpu0
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-us")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-us")
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/call")
		})
	}
}

// flags are the trace flags of the caller's traceparent.
var flags = "01"

func benchTracedCall(c *http.Client, up string) error {
	req, _ := http.NewRequest("POST", up+"/bench/validated", bytes.NewReader([]byte(benchBody)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-"+flags)
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return io.ErrUnexpectedEOF
	}
	return nil
}

// tracedServer is a proxy with benchConfig's routes in front of the demo
// upstream, events to an NDJSON file, and tr as its Tracer (nil: off). It
// returns the upstream's URL.
func tracedServer(b *testing.B, tr proxy.Tracer) (string, *proxy.Server) {
	b.Helper()
	e := newEnv(b, "listen:\n  forward: 127.0.0.1:0\n") // for its demo upstream
	cfgYAML := strings.ReplaceAll(benchConfig, "UPHOSTPORT", e.up.Addr())
	var cfg proxy.Config
	if err := yaml.Unmarshal([]byte(cfgYAML), &cfg); err != nil {
		b.Fatal(err)
	}
	if err := cfg.Validate(b.TempDir()); err != nil {
		b.Fatal(err)
	}
	f, err := sink.OpenFile(sink.FileConfig{Path: b.TempDir() + "/events.ndjson"})
	if err != nil {
		b.Fatal(err)
	}
	q, err := sink.NewQueue(f, sink.QueueConfig{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	srv, err := proxy.New(proxy.Snapshot{Config: &cfg, Version: "v", PolicyVersion: "p"}, proxy.Options{Recorder: q, Sidecar: "bench", Tracer: tr})
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		b.Fatal(err)
	}
	go srv.Serve()
	b.Cleanup(func() {
		srv.Shutdown(context.Background())
		q.Close(context.Background())
		f.Close()
	})
	return e.up.URL(), srv
}
