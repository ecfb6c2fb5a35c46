//go:build linux

// Command extbench measures toolgate from outside, as an operator would: a
// load generator in its own process (wrk), a Go net/http upstream in its own
// process (the demo tools' POST /bench), and every path between them side by
// side in one run: direct, nginx as a reverse proxy, squid as a forward
// proxy, goproxy (the library toolgate is built on) forwarding with nothing
// of toolgate's on it, and toolgate as a forward proxy (passthrough, strict schema, schema
// plus the 5-rule bench Rego policy), as a reverse proxy (schema plus Rego),
// and with its events going to the NDJSON file or to ClickHouse.
//
// Beside them runs the peer a team would otherwise put in front of its
// tools (path key nginx-opa): nginx with its Lua module, whose access phase
// reads each call's body and asks an `opa run --server` on its own loopback
// port (OPA's query API, POST /) to decide it with the same JSON Schema
// (the bench_rego tool's, closed as strict: true closes it, checked with
// Rego's json.match_schema) and the same 5-rule bench policy, then proxies
// the call on allow and answers 403 otherwise; its CPU counts nginx and
// OPA together. Before measuring, the agreement check sends a fixed set of
// calls (valid ones, schema violations, policy denials) along toolgate's
// schema + Rego paths and the peer and stops the run when any path allows
// a call another refuses, judged by whether the upstream's answer came
// back. The peer is left out, saying why, when Debian's
// libnginx-mod-http-lua is not installed or the opa binary (built once from
// the OPA version go.mod pins, internal/opacli) cannot be had, or when
// -only selects no toolgate schema + Rego path (rego, reverse) to check it
// against.
//
// Each round runs every path once with 32 connections (throughput, and the
// CPU each process spent per request, read from /proc) and once with one
// connection (p50 and p99 latency); the paths' order rotates from round to
// round, so a drift of the machine weighs on all of them. The table prints
// the medians over the rounds and each path's ratio to direct.
//
//	go run ./internal/extbench                     # make bench-external
//	go run ./internal/extbench -rounds 1 -duration 1s -latency-duration 500ms
//	go run ./internal/extbench -toolgate main=/tmp/main.toolgate -toolgate new=bin/toolgate
//	go run ./internal/extbench -toolgate main=/tmp/main.toolgate -toolgate new=bin/toolgate -together -only 'rego$' -rounds 6 -duration 15s
//
// With several -toolgate builds, each toolgate path runs once per build in
// every round (an A/B comparison in one run). With two builds and
// -together, each round instead runs each toolgate path of both builds at
// the same time, each with half the connections, and the table gives each
// build's CPU per call and, round by round, the second's over the first's:
// on a shared machine, whose neighbours move a path's CPU per call by 5 to
// 10% from one run to the next, a difference of 1 or 2% shows only that
// way (docs/performance.md). Every process it starts (the
// upstream, nginx, squid, each toolgate, a private ClickHouse) is stopped
// when it ends, also on Ctrl-C.
//
// It needs wrk, nginx and squid (Debian packages of those names;
// scripts/testdeps.sh --bench installs them), for the nginx + OPA peer
// libnginx-mod-http-lua (scripts/testdeps.sh installs it) and, for the
// ClickHouse path, clickhouse-server (or -clickhouse=false).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if code, ok := serveRole(os.Stdout, os.Stderr); ok {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
