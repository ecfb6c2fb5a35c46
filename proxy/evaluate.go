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
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
)

// Verdict is what a tool's checks decide for one call, found without
// sending anything (policies.Verdict, where the case-file runner reads it
// too).
type Verdict = policies.Verdict

// Evaluate runs a tool's checks on arguments exactly as the pipeline does
// for a call, without sending anything: the tool's chain without
// extraction (args are given) and dispatch, its schema, its policies and
// the origin rule for injected headers, as EvaluateAt with the tool's own
// origin as the URL. headers are the request headers a caller would send
// (the agent and session headers, allow-listed headers for policies). Path
// variables of the tool's template are taken from args.
func Evaluate(ctx context.Context, snap pipe.Snapshot, toolName string, args map[string]any, headers http.Header) (Verdict, error) {
	return EvaluateAt(ctx, snap, toolName, "", args, headers)
}

// EvaluateAt is Evaluate for a call sent to rawURL, as a legacy service
// would send it (scheme, host, port, path and query): the URL is put in
// canonical form and routed as the sidecar does, it must reach the named
// tool, its path variables join args as extraction adds them, and the
// origin rule sees its scheme and port, so a call the sidecar refuses
// for going to another origin than the tool's is refused here too. An
// empty rawURL is the tool's own origin: https, the tool's host (or
// upstream.invalid) and port, the path filled from args.
func EvaluateAt(ctx context.Context, snap pipe.Snapshot, toolName, rawURL string, args map[string]any, headers http.Header) (Verdict, error) {
	if snap.Config == nil {
		return Verdict{}, fmt.Errorf("no configuration")
	}
	var t *conf.Tool
	var names []string
	for _, tt := range snap.Config.Compiled {
		names = append(names, tt.Cfg.Name)
		if tt.Cfg.Name == toolName {
			t = tt
		}
	}
	if t == nil {
		sort.Strings(names)
		return Verdict{}, fmt.Errorf("no tool named %q; the config has: %s", toolName, strings.Join(names, ", "))
	}
	if t.MCP != nil {
		return Verdict{}, fmt.Errorf("tool %q is an MCP route: its tools/call are checked against the schemas its server lists; evaluate one of its tools with a recorded or live tools/list (policy eval --tools-list FILE or --live URL, tools_list: in a case file; see docs/mcp.md)", toolName)
	}
	method := t.Cfg.Match.Method
	if method == "" {
		method = http.MethodPost
	}
	var target *url.URL
	var vars map[string]string
	if rawURL == "" {
		target, vars = evalURL(t, args)
	} else {
		var err error
		if target, vars, err = evalRoute(ctx, snap.Config, t, method, rawURL); err != nil {
			return Verdict{}, err
		}
		if len(vars) > 0 {
			merged := make(map[string]any, len(args)+len(vars))
			for k, v := range args {
				merged[k] = v
			}
			for k, v := range vars {
				merged[k] = v
			}
			args = merged
		}
	}
	r, err := http.NewRequestWithContext(ctx, method, target.String(), http.NoBody)
	if err != nil {
		return Verdict{}, err
	}
	for k, vs := range headers {
		r.Header[k] = vs
	}
	st := &pipe.State{Snapshot: snap, Cfg: snap.Config}
	st.UsePolicyHeaders(defaultPolicyHeaders)
	c := &pipe.Call{State: st, Tool: t, Start: time.Now(), Client: ctx, In: r, Target: target, Vars: vars, Args: args}
	evalCaller(c, r)
	v := Verdict{Allowed: true}
	// The tool's chain without extraction and dispatch: the steps that
	// decide a call from its arguments and where it goes (schema,
	// policies, origin), as a call's run them.
	if ref := compileChain(t, &st.Snapshot, nil).RunEval(ctx, c); ref != nil {
		v = refusedVerdict(ref)
	} else {
		v.Inject = injected(c)
		v.Approval = c.Ask
		if len(v.Inject) > 0 {
			v.InjectOrigin = originText(t)
		}
	}
	v.DryRun = c.Event.DryRunViolations
	v.PolicyError = c.Event.PolicyError
	return v, nil
}

// evalRoute puts rawURL in canonical form and routes it as the pipeline
// does; it is an error unless the call reaches t. It returns the
// canonical URL the call would go to and its path variables.
func evalRoute(ctx context.Context, cfg *conf.Config, t *conf.Tool, method, rawURL string) (*url.URL, map[string]string, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, nil, fmt.Errorf("--url %q: expected an absolute http or https URL, as the service sends it", rawURL)
	}
	cn, ref := cfg.Canonicalize(ctx, method, u)
	if ref != nil {
		return nil, nil, fmt.Errorf("--url %q: the sidecar refuses it before routing: %s", rawURL, ref.Detail)
	}
	got, vars := conf.Route(cfg.Compiled, cn.Method, cn.Host, cn.Port, cn.Path)
	switch {
	case got == nil:
		return nil, nil, fmt.Errorf("--url %q: a %s of it matches no tool; tool %q matches %s %s%s", rawURL, cn.Method, t.Cfg.Name, orAny(t.Cfg.Match.Method, "any method"), orAny(t.Cfg.Match.Host, "any host"), t.Cfg.Match.Path)
	case got != t:
		return nil, nil, fmt.Errorf("--url %q: a %s of it is a call of tool %q, not %q", rawURL, cn.Method, got.Cfg.Name, t.Cfg.Name)
	}
	return cn.URL(t, u.RawQuery), vars, nil
}

// orAny is s, or what its absence means.
func orAny(s, absent string) string {
	if s == "" {
		return absent
	}
	return s
}

// originText says where t's injected headers go, for a verdict: the only
// origin the sidecar sends them to, and the settings that widen it.
func originText(t *conf.Tool) string {
	scheme := "https"
	if t.Cfg.InjectOverHTTP {
		scheme = "https or http"
	}
	host := t.Host
	if host == "" {
		host = "the call's host"
	}
	port := t.Port
	switch {
	case port != "":
	case t.Cfg.InjectOverHTTP:
		port = "443 or 80"
	default:
		port = "443"
	}
	s := fmt.Sprintf("%s to %s, port %s, only; elsewhere refused (policy/origin_mismatch)", scheme, host, port)
	var widen []string
	if !t.Cfg.InjectOverHTTP {
		widen = append(widen, "inject_over_http: true allows plain HTTP")
	}
	if t.Port == "" && t.Host != "" {
		widen = append(widen, "a port in match.host another port")
	}
	if len(widen) > 0 {
		s += ": " + strings.Join(widen, ", ")
	}
	return s
}

// evalURL is the URL a call of t with args goes to at the tool's own
// origin: https, the tool's host (or upstream.invalid) and port, and its
// path template filled from args.
func evalURL(t *conf.Tool, args map[string]any) (*url.URL, map[string]string) {
	host := t.Host
	if host == "" {
		host = "upstream.invalid"
	}
	if t.Port != "" {
		host += ":" + t.Port
	}
	vars := map[string]string{}
	var path strings.Builder
	for _, seg := range t.Tmpl.Segs {
		path.WriteByte('/')
		if seg.Name == "" {
			path.WriteString(seg.Lit)
			continue
		}
		v := fmt.Sprint(args[seg.Name])
		vars[seg.Name] = v
		path.WriteString(seg.Prefix + url.PathEscape(v) + seg.Suffix)
	}
	return &url.URL{Scheme: "https", Host: host, Path: path.String()}, vars
}

// evalCaller sets the event's caller fields from r's headers, as the
// pipeline does.
func evalCaller(c *pipe.Call, r *http.Request) {
	cfg := c.State.Cfg
	c.Event.Agent = conf.BoundCallerID(r.Header.Get(cfg.Headers.Agent), cfg.Limits.MaxCallerIDBytes)
	c.Event.Session = conf.BoundCallerID(r.Header.Get(cfg.Headers.Session), cfg.Limits.MaxCallerIDBytes)
	c.Event.TraceID = pipe.TraceID(r.Header.Get("Traceparent"))
}

// refusedVerdict is the verdict of a refusal.
func refusedVerdict(ref *conf.Refusal) Verdict {
	v := Verdict{Status: conf.RefusalStatus(ref), Envelope: ref.Envelope(), Code: string(ref.Code), Reason: ref.Reason, Detail: ref.Detail}
	for _, vi := range ref.Violations {
		v.Paths = append(v.Paths, vi.Path)
		v.Messages = append(v.Messages, vi.Message)
	}
	return v
}

// injected lists the headers an allowed call would get upstream, secrets
// of the configuration shown as "(set)".
func injected(c *pipe.Call) map[string]string {
	out := map[string]string{}
	for k := range c.Tool.Inject {
		out[k] = "(set)"
	}
	for k, val := range c.Inject {
		out[k] = val
	}
	return out
}
