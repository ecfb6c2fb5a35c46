package proxy

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/toolgate/toolgate/policies"
)

// Verdict is what a tool's checks decide for one call, found without
// sending anything (policies.Verdict, where the case-file runner reads it
// too).
type Verdict = policies.Verdict

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
		return Verdict{}, fmt.Errorf("tool %q is an MCP route: its tools/call are checked against the schemas its server lists; evaluate one of its tools with a recorded or live tools/list (policy eval --tools-list FILE or --live URL, tools_list: in a case file; see docs/mcp.md)", toolName)
	}
	target, vars := evalURL(t, args)
	method := t.cfg.Match.Method
	if method == "" {
		method = http.MethodPost
	}
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
	c := &call{st: st, t: t, start: time.Now(), client: ctx, in: r, target: target, vars: vars, args: args}
	c.evalCaller(r)
	v := Verdict{Allowed: true}
	// The tool's chain without dispatch: its argument steps (schema,
	// policies) on the arguments given, as a call's run them.
	if ref := compileChain(t, &st.Snapshot, nil).runArgs(ctx, c); ref != nil {
		v = refusedVerdict(ref)
	} else {
		v.Inject = c.injected()
		v.Approval = c.ask
	}
	v.DryRun = c.ev.DryRunViolations
	v.PolicyError = c.ev.PolicyError
	return v, nil
}

// evalURL is the URL a call of t with args goes to: the tool's host (or
// upstream.invalid) and its path template filled from args.
func evalURL(t *tool, args map[string]any) (*url.URL, map[string]string) {
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
	return &url.URL{Scheme: "http", Host: host, Path: path.String()}, vars
}

// evalCaller sets the event's caller fields from r's headers, as the
// pipeline does.
func (c *call) evalCaller(r *http.Request) {
	cfg := c.st.cfg
	c.ev.Agent = boundCallerID(r.Header.Get(cfg.Headers.Agent), cfg.Limits.MaxCallerIDBytes)
	c.ev.Session = boundCallerID(r.Header.Get(cfg.Headers.Session), cfg.Limits.MaxCallerIDBytes)
	c.ev.TraceID = traceID(r.Header.Get("Traceparent"))
}

// refusedVerdict is the verdict of a refusal.
func refusedVerdict(ref *refusal) Verdict {
	v := Verdict{Status: refusalStatus(ref), Envelope: ref.envelope(), Code: string(ref.code), Reason: ref.reason, Detail: ref.detail}
	for _, vi := range ref.violations {
		v.Paths = append(v.Paths, vi.Path)
		v.Messages = append(v.Messages, vi.Message)
	}
	return v
}

// injected lists the headers an allowed call would get upstream, secrets
// of the configuration shown as "(set)".
func (c *call) injected() map[string]string {
	out := map[string]string{}
	for k := range c.t.inject {
		out[k] = "(set)"
	}
	for k, val := range c.inject {
		out[k] = val
	}
	return out
}
