//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/template"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/internal/opacli"
)

// The Lua module and the module it needs, as Debian's libnginx-mod-http-lua
// and libnginx-mod-http-ndk install them.
const (
	luaModule = "/usr/lib/nginx/modules/ngx_http_lua_module.so"
	ndkModule = "/usr/lib/nginx/modules/ndk_http_module.so"
)

// peerKey is the nginx + OPA peer's path key.
const peerKey = "nginx-opa"

// errPeerMissing says the nginx + OPA peer cannot be had on this machine.
var errPeerMissing = errors.New("the nginx + OPA peer cannot be started")

// startOPAPeer starts the peer a team would otherwise run: an `opa run
// --server` with the bench schema and policy, and nginx with the Lua
// module asking it about each call (testdata/nginx-opa.conf.tmpl). It
// returns errPeerMissing, wrapped with the reason, when the Lua module or
// the opa binary cannot be had.
func startOPAPeer(ctx context.Context, ps *procs, dir, upAddr, policy string, logw io.Writer) (path, error) {
	for _, m := range []string{luaModule, ndkModule} {
		if _, err := os.Stat(m); err != nil {
			return path{}, fmt.Errorf("%w: %s is missing: install libnginx-mod-http-lua (scripts/testdeps.sh does)", errPeerMissing, m)
		}
	}
	fmt.Fprintln(logw, "extbench: the opa binary (built into the user cache once, from the version go.mod pins)")
	opa, err := opacli.Path()
	if err != nil {
		return path{}, fmt.Errorf("%w: the opa binary: %v", errPeerMissing, err)
	}
	pd := filepath.Join(dir, peerKey)
	schema, err := peerSchema()
	if err != nil {
		return path{}, err
	}
	rego, err := render(pd, "opa-peer.rego.tmpl", map[string]any{"Schema": schema})
	if err != nil {
		return path{}, err
	}
	oport, err := freePort()
	if err != nil {
		return path{}, err
	}
	opaAddr := fmt.Sprintf("127.0.0.1:%d", oport)
	// Errors only in its log, no telemetry (it would ask openpolicyagent.org
	// for the latest version), decisions as the bench policy's package path.
	op, err := ps.start("opa", nil, nil, opa, "run", "--server", "--addr", opaAddr, "--log-level", "error",
		"--disable-telemetry", "--set", "default_decision=/extbench/peer/allow", rego, filepath.Join(policy, "bench.rego"))
	if err != nil {
		return path{}, err
	}
	if err := waitListening(ctx, op, opaAddr); err != nil {
		return path{}, err
	}
	nport, err := freePort()
	if err != nil {
		return path{}, err
	}
	listen := fmt.Sprintf("127.0.0.1:%d", nport)
	conf, err := render(pd, "nginx-opa.conf.tmpl", map[string]any{"Dir": pd, "Upstream": upAddr, "Listen": listen,
		"OPA": opaAddr, "Lua": luaModule, "NDK": ndkModule})
	if err != nil {
		return path{}, err
	}
	np, err := ps.start("nginx-opa", nil, nil, mustLook("nginx"), "-p", pd, "-c", conf, "-e", filepath.Join(pd, "nginx-error.log"))
	if err != nil {
		return path{}, err
	}
	if err := waitListening(ctx, np, listen); err != nil {
		return path{}, err
	}
	p := reversePath(peerKey, "nginx + OPA server (Lua access phase, same schema + 5-rule Rego), 2 workers", listen, "/bench/"+peerKey, np, true, false)
	p.also = []*proc{op}
	return p, nil
}

// peerSchema is the bench tool's schema as toolgate's rego route has it
// (bench_rego in testdata/toolgate.yaml.tmpl), closed as toolgate's
// strict: true closes it, as JSON: so the peer checks what toolgate
// checks by construction, not by a copy kept in step by hand.
func peerSchema() (string, error) {
	t, err := template.ParseFS(templates, "testdata/toolgate.yaml.tmpl")
	if err != nil {
		return "", err
	}
	// Filled as for a forward path; the tools are the same in every variant.
	var src bytes.Buffer
	if err := t.Execute(&src, map[string]any{"Name": "peer", "Dir": "/nonexistent", "Forward": "127.0.0.1:1", "Reverse": "",
		"Upstream": "127.0.0.1:2", "Admin": "off", "Pprof": false, "Policy": "/nonexistent", "ClickHouse": "", "Database": "", "WriteFile": false}); err != nil {
		return "", err
	}
	var conf struct {
		Tools []struct {
			Name   string         `yaml:"name"`
			Schema map[string]any `yaml:"schema"`
		} `yaml:"tools"`
	}
	if err := yaml.Unmarshal(src.Bytes(), &conf); err != nil {
		return "", fmt.Errorf("testdata/toolgate.yaml.tmpl: %w", err)
	}
	for _, tool := range conf.Tools {
		if tool.Name == "bench_rego" && tool.Schema != nil {
			closeStrictly(tool.Schema)
			b, err := json.Marshal(tool.Schema)
			return string(b), err
		}
	}
	return "", errors.New("testdata/toolgate.yaml.tmpl: no schema for the tool bench_rego")
}

// closeStrictly adds additionalProperties: false to every object schema
// that declares properties and does not set it, at every depth reached
// through properties and items: what toolgate's strict: true means for a
// schema without composition (docs/config.md, "Schemas: what strict
// means"), which is all the bench schema has.
func closeStrictly(s map[string]any) {
	props, ok := s["properties"].(map[string]any)
	if ok {
		if _, set := s["additionalProperties"]; !set {
			s["additionalProperties"] = false
		}
		for _, v := range props {
			if m, ok := v.(map[string]any); ok {
				closeStrictly(m)
			}
		}
	}
	if m, ok := s["items"].(map[string]any); ok {
		closeStrictly(m)
	}
}

// agreementCall is one call of the agreement check, with the verdict the
// bench schema and policy give it.
type agreementCall struct {
	name  string
	body  string
	allow bool
}

// agreementCalls are the calls both toolgate's schema + Rego path and the
// nginx + OPA peer must decide alike before either is measured: valid
// calls (among them the policy's bounds exactly), schema violations
// (type, required, bounds, enum, strictness at the root and nested, not
// an object, not JSON) and policy denials (each of its four deny rules).
var agreementCalls = []agreementCall{
	{"the bench call", benchBody, true},
	{"only the required query", `{"query":"a"}`, true},
	{"the policy's bounds exactly", `{"query":"a","organism":"rat","limit":50,"ids":[` + ids(20) + `]}`, true},
	{"an empty filters object", `{"query":"a","organism":"mouse","limit":1,"filters":{}}`, true},
	{"query not a string", `{"query":1}`, false},
	{"query missing", `{"organism":"human"}`, false},
	{"limit above the schema's maximum", `{"query":"a","limit":101}`, false},
	{"organism outside the enum", `{"query":"a","organism":"dog"}`, false},
	{"an undeclared argument", `{"query":"a","verbose":true}`, false},
	{"an undeclared nested argument", `{"query":"a","filters":{"phase_min":2,"color":"red"}}`, false},
	{"an array, not an object", `["query"]`, false},
	{"not JSON", `{"query":`, false},
	{"limit above the policy's bound", `{"query":"a","limit":51}`, false},
	{"an e-mail address in the query", `{"query":"papers by alice@example.org on EGFR"}`, false},
	{"too many ids", `{"query":"a","ids":[` + ids(21) + `]}`, false},
}

// ids is n distinct quoted ids, comma-separated.
func ids(n int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf(`"P%05d"`, i)
	}
	return strings.Join(s, ",")
}

// upstreamMark is in the upstream's answer to every POST /bench/...
// (internal/demotools' fixed bench body) and in toolgate's envelope of it:
// an answer that holds it came from the upstream, so the call reached it.
const upstreamMark = `"id":"b0001"`

// reached sends body along p and reports whether the call reached the
// upstream (a 200 answer holding the upstream's answer) or was refused (a
// 4xx answer without it); anything else is an error.
func reached(ctx context.Context, p path, body string) (bool, error) {
	st, ans, err := post(ctx, p, body)
	switch {
	case err != nil:
		return false, err
	case st == http.StatusOK && strings.Contains(ans, upstreamMark):
		return true, nil
	case st >= 400 && st <= 499 && !strings.Contains(ans, upstreamMark):
		return false, nil
	}
	return false, fmt.Errorf("status %d, neither the upstream's answer nor a refusal: %.300s", st, ans)
}

// agree sends every agreement call along each of the paths and fails when
// a path allows what another refuses, or decides a call otherwise than the
// bench schema and policy say.
func agree(ctx context.Context, calls []agreementCall, paths ...path) error {
	var errs []error
	for _, c := range calls {
		got := make([]string, len(paths))
		var bad bool
		for i, p := range paths {
			ok, err := reached(ctx, p, c.body)
			if err != nil {
				return fmt.Errorf("agreement check, %s along %s: %w", c.name, p.Key, err)
			}
			got[i] = fmt.Sprintf("%s %s", p.Key, verdict(ok))
			bad = bad || ok != c.allow
		}
		if bad {
			errs = append(errs, fmt.Errorf("%s (%.80s), want %s: %s", c.name, c.body, verdict(c.allow), strings.Join(got, ", ")))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("agreement check: the paths do not decide alike:\n%w", errors.Join(errs...))
	}
	return nil
}

func verdict(allow bool) string {
	if allow {
		return "allowed"
	}
	return "refused"
}

// post sends body along p with Go's client, as a caller configured with
// the path's proxy or base URL would, and returns the status and answer.
func post(ctx context.Context, p path, body string) (int, string, error) {
	tr := &http.Transport{}
	if p.proxy != "" {
		u, _ := url.Parse(p.proxy)
		tr.Proxy = http.ProxyURL(u)
	}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	req, err := http.NewRequestWithContext(ctx, "POST", p.target, bytes.NewReader([]byte(body)))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, string(b), err
}
