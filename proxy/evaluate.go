package proxy

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

// Verdict is what a tool's checks decide for one call, found without
// sending anything: `toolgate policy eval` and `toolgate policy test` print
// and compare it.
type Verdict struct {
	// Allowed is true when the call would go upstream.
	Allowed bool
	// Status is the HTTP status of the refusal; 0 when allowed.
	Status int
	// Envelope is the exact body a refused caller gets; nil when allowed.
	Envelope []byte
	// Code, Reason and Detail are the refusal's; empty when allowed.
	Code, Reason, Detail string
	// Paths are the violations' JSON pointers.
	Paths []string
	// Messages are the violations' messages.
	Messages []string
	// Inject are the headers that would be added upstream: the tool's
	// inject_headers, then the policies'. Secrets from the environment are
	// shown as "(set)".
	Inject map[string]string
	// DryRun are the messages of dry-run policies that would have denied.
	DryRun []string
	// PolicyError names policies that failed while the tool fails open.
	PolicyError string
}

// Evaluate runs a tool's checks (the schema, then its policies) on
// arguments exactly as the pipeline does for a call, without sending
// anything. headers are the request headers a caller would send (the
// agent and session headers, allow-listed headers for policies). Path
// variables of the tool's template are taken from args.
func Evaluate(ctx context.Context, snap Snapshot, toolName string, args map[string]any, headers http.Header) (Verdict, error) {
	if snap.Config == nil {
		return Verdict{}, fmt.Errorf("no configuration")
	}
	var t *tool
	var names []string
	for _, tt := range snap.Config.tools {
		names = append(names, tt.cfg.Name)
		if tt.cfg.Name == toolName {
			t = tt
		}
	}
	if t == nil {
		sort.Strings(names)
		return Verdict{}, fmt.Errorf("no tool named %q; the config has: %s", toolName, strings.Join(names, ", "))
	}
	if t.mcp != nil {
		return Verdict{}, fmt.Errorf("tool %q is an MCP route: its tools/call are checked against the schemas its server lists, learned at run time (see docs/mcp.md)", toolName)
	}
	method := t.cfg.Match.Method
	if method == "" {
		method = http.MethodPost
	}
	host := t.host
	if host == "" {
		host = "upstream.invalid"
	}
	if t.port != "" {
		host += ":" + t.port
	}
	vars := map[string]string{}
	var path strings.Builder
	for _, seg := range t.tmpl.segs {
		path.WriteByte('/')
		if seg.name == "" {
			path.WriteString(seg.lit)
			continue
		}
		v := fmt.Sprint(args[seg.name])
		vars[seg.name] = v
		path.WriteString(seg.prefix + url.PathEscape(v) + seg.suffix)
	}
	target := &url.URL{Scheme: "http", Host: host, Path: path.String()}
	r, err := http.NewRequestWithContext(ctx, method, target.String(), http.NoBody)
	if err != nil {
		return Verdict{}, err
	}
	for k, vs := range headers {
		r.Header[k] = vs
	}
	st := &state{Snapshot: snap, cfg: snap.Config}
	if st.PolicyHeaders == nil {
		st.PolicyHeaders = defaultPolicyHeaders
	}
	c := &call{st: st, t: t, start: time.Now(), client: ctx}
	c.ev.Agent = boundCallerID(r.Header.Get(snap.Config.Headers.Agent), snap.Config.Limits.MaxCallerIDBytes)
	c.ev.Session = boundCallerID(r.Header.Get(snap.Config.Headers.Session), snap.Config.Limits.MaxCallerIDBytes)
	c.ev.TraceID = traceID(r.Header.Get("Traceparent"))
	v := Verdict{Allowed: true}
	if ref := c.check(r, target, vars, args); ref != nil {
		v = Verdict{Status: refusalStatus(ref), Envelope: ref.envelope(), Code: string(ref.code), Reason: ref.reason, Detail: ref.detail}
		for _, vi := range ref.violations {
			v.Paths = append(v.Paths, vi.Path)
			v.Messages = append(v.Messages, vi.Message)
		}
	} else {
		v.Inject = map[string]string{}
		for k := range t.inject {
			v.Inject[k] = "(set)"
		}
		for k, val := range c.inject {
			v.Inject[k] = val
		}
	}
	v.DryRun = c.ev.DryRunViolations
	v.PolicyError = c.ev.PolicyError
	return v, nil
}
