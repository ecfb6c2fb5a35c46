package detect

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Kind names what a finding is: "secret.<format>", "pii.email",
// "pii.phone" or "instruction".
type Kind string

// The kinds of findings.
const (
	KindAWSAccessKey  Kind = "secret.aws_access_key"
	KindAWSSecretKey  Kind = "secret.aws_secret_key"
	KindGitHubToken   Kind = "secret.github_token"
	KindGitLabToken   Kind = "secret.gitlab_token"
	KindSlackToken    Kind = "secret.slack_token"
	KindStripeKey     Kind = "secret.stripe_key"
	KindGoogleAPIKey  Kind = "secret.google_api_key"
	KindOpenAIKey     Kind = "secret.openai_key"
	KindAnthropicKey  Kind = "secret.anthropic_key"
	KindPrivateKey    Kind = "secret.private_key"
	KindJWT           Kind = "secret.jwt"
	KindSecretGeneric Kind = "secret.generic"
	KindEmail         Kind = "pii.email"
	KindPhone         Kind = "pii.phone"
	KindInstruction   Kind = "instruction"
)

// AllKinds lists every kind a Detector can report.
func AllKinds() []Kind {
	out := make([]Kind, 0, len(secretDetectors)+4)
	for _, d := range secretDetectors {
		out = append(out, d.kind)
	}
	return append(out, KindSecretGeneric, KindEmail, KindPhone, KindInstruction)
}

// Marker is the text that replaces a redacted finding of kind k:
// "[redacted:<kind>]".
func Marker(k Kind) string { return "[redacted:" + string(k) + "]" }

// Finding is one detection. It says where, never what: the matched text
// is not in it, so a finding can go into events and error details.
type Finding struct {
	// Kind is what was found.
	Kind Kind
	// Pointer is the RFC 6901 JSON pointer of the string the finding is
	// in ("" for the root, and for plain text).
	Pointer string
	// Start and End are the byte offsets of the finding in that string:
	// 0 <= Start < End <= len(string).
	Start, End int
	// Score is the instruction score of the paragraph (KindInstruction);
	// 0 for other kinds.
	Score int
}

// Bound names the bound that stopped a scan early.
type Bound string

// The bounds a scan can stop at.
const (
	BoundNone     Bound = ""
	BoundBytes    Bound = "max_bytes"
	BoundFindings Bound = "max_findings"
	BoundDepth    Bound = "max_depth"
)

// Report is what a scan found.
type Report struct {
	// Findings are in document order: object members by name, array
	// elements by index, within a string by Start. At most MaxFindings.
	Findings []Finding
	// Incomplete names the first bound the scan reached; BoundNone when
	// the whole value was scanned. What lies beyond a bound was not
	// scanned: a caller that must not pass unscanned content treats an
	// incomplete report as a finding.
	Incomplete Bound
}

// Redaction is what a redaction replaced.
type Redaction struct {
	// Counts is the number of findings replaced, per kind.
	Counts map[Kind]int
	// Incomplete is the scan's Incomplete: what lay beyond the bound was
	// neither scanned nor redacted.
	Incomplete Bound
}

// Detector runs the detectors a Config selects. It is immutable and safe
// for concurrent use.
type Detector struct {
	cfg       Config
	secrets   []secretDetector
	generic   bool
	email     bool
	phone     bool
	instr     bool
	threshold int
}

// New validates cfg (applying its defaults) and builds its Detector.
func New(cfg Config) (*Detector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	want := map[Kind]bool{}
	for _, name := range cfg.Detect {
		ks, _ := kindsOf(name)
		for _, k := range ks {
			want[k] = true
		}
	}
	d := &Detector{cfg: cfg, threshold: cfg.InstructionThreshold}
	for _, s := range secretDetectors {
		if want[s.kind] {
			d.secrets = append(d.secrets, s)
		}
	}
	d.generic = want[KindSecretGeneric]
	d.email = want[KindEmail]
	d.phone = want[KindPhone]
	d.instr = want[KindInstruction]
	return d, nil
}

// Config returns the validated config the Detector was built from.
func (d *Detector) Config() Config { return d.cfg }

// scan is the state of one walk.
type scan struct {
	d      *Detector
	budget int
	ptr    []byte
	rep    Report
}

// full reports whether a bound stopped the scan.
func (s *scan) full() bool { return s.rep.Incomplete != BoundNone }

// stop records the first bound reached.
func (s *scan) stop(b Bound) {
	if s.rep.Incomplete == BoundNone {
		s.rep.Incomplete = b
	}
}

// Scan runs the detectors over v, a value as encoding/json decodes it
// (map[string]any, []any, string, json.Number, float64, bool, nil). Only
// strings are scanned; object member names are not, but a member's name
// gives context to its value (a string under "password" or "api_key" that
// looks random is a secret.generic finding). Other types are skipped.
func (d *Detector) Scan(v any) Report {
	s := &scan{d: d, budget: d.cfg.MaxBytes}
	s.walk(v, "", 0)
	return s.rep
}

// ScanText runs the detectors over plain text; findings have Pointer "".
func (d *Detector) ScanText(text string) Report {
	s := &scan{d: d, budget: d.cfg.MaxBytes}
	s.str(text, "")
	return s.rep
}

// walk scans v at depth; key is the name of the member v is the value of
// ("" when v is not an object member). Recursion is bounded by MaxDepth.
func (s *scan) walk(v any, key string, depth int) {
	if s.full() {
		return
	}
	switch t := v.(type) {
	case string:
		s.str(t, key)
	case map[string]any:
		if depth >= s.d.cfg.MaxDepth {
			if len(t) > 0 {
				s.stop(BoundDepth)
			}
			return
		}
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			n := len(s.ptr)
			s.ptr = appendToken(append(s.ptr, '/'), k)
			s.walk(t[k], k, depth+1)
			s.ptr = s.ptr[:n]
			if s.full() {
				return
			}
		}
	case []any:
		if depth >= s.d.cfg.MaxDepth {
			if len(t) > 0 {
				s.stop(BoundDepth)
			}
			return
		}
		for i, e := range t {
			n := len(s.ptr)
			s.ptr = strconv.AppendInt(append(s.ptr, '/'), int64(i), 10)
			s.walk(e, "", depth+1)
			s.ptr = s.ptr[:n]
			if s.full() {
				return
			}
		}
	case json.Number, float64, bool, nil:
	}
}

// tokenEscaper escapes an RFC 6901 reference token.
var tokenEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// appendToken appends k escaped as an RFC 6901 reference token.
func appendToken(b []byte, k string) []byte {
	if strings.ContainsAny(k, "~/") {
		k = tokenEscaper.Replace(k)
	}
	return append(b, k...)
}

// str scans one string (up to the byte budget) and records its findings.
func (s *scan) str(text, key string) {
	if len(text) > s.budget {
		text = text[:s.budget]
		s.stop(BoundBytes)
	}
	s.budget -= len(text)
	if text == "" {
		return
	}
	var fs []Finding
	emit := func(k Kind, start, end, score int) {
		fs = append(fs, Finding{Kind: k, Start: start, End: end, Score: score})
	}
	for _, sd := range s.d.secrets {
		sd.find(text, emit)
	}
	if s.d.generic {
		findGeneric(text, key, emit)
	}
	if s.d.email {
		findEmails(text, emit)
	}
	if s.d.phone {
		findPhones(text, emit)
	}
	if s.d.instr {
		findInstructions(text, s.d.threshold, emit)
	}
	if len(fs) == 0 {
		return
	}
	fs = dedupe(fs)
	ptr := string(s.ptr)
	for _, f := range fs {
		if len(s.rep.Findings) >= s.d.cfg.MaxFindings {
			s.stop(BoundFindings)
			return
		}
		f.Pointer = ptr
		s.rep.Findings = append(s.rep.Findings, f)
	}
}

// dedupe sorts findings by position and drops a finding whose span lies
// inside an earlier one of another secret or PII kind (a JWT is not also
// a generic secret). An instruction span may contain other findings: both
// are kept. Sorted by start, then longest first, a finding lies inside an
// earlier one exactly when it ends no later than the furthest end so far,
// so one pass does (a string may hold very many findings).
func dedupe(fs []Finding) []Finding {
	sort.SliceStable(fs, func(i, j int) bool {
		if fs[i].Start != fs[j].Start {
			return fs[i].Start < fs[j].Start
		}
		return fs[i].End > fs[j].End
	})
	out := fs[:0]
	maxEnd := -1
	for _, f := range fs {
		if f.Kind != KindInstruction {
			if f.End <= maxEnd {
				continue
			}
			maxEnd = f.End
		}
		out = append(out, f)
	}
	return out
}

// Redact scans v and returns it with every finding replaced by its
// Marker, and what was replaced. v is not changed; the result shares the
// parts of v that hold no finding (treat both as read-only, or copy).
func (d *Detector) Redact(v any) (any, Redaction) {
	rep := d.Scan(v)
	out, counts := RedactFindings(v, rep.Findings)
	return out, Redaction{Counts: counts, Incomplete: rep.Incomplete}
}

// RedactText scans text and returns it with every finding replaced by
// its Marker, and what was replaced.
func (d *Detector) RedactText(text string) (string, Redaction) {
	rep := d.ScanText(text)
	out, counts := redactString(text, rep.Findings)
	return out, Redaction{Counts: counts, Incomplete: rep.Incomplete}
}

// RedactFindings returns v with the given findings (from a Scan of v,
// perhaps filtered by kind) replaced by their Markers, and the count per
// kind replaced. v is not changed; only the objects and arrays on the way
// to a redacted string are copied, the rest is shared with v. A finding
// whose pointer does not name a string of v, or whose span is out of the
// string, is ignored.
func RedactFindings(v any, fs []Finding) (any, map[Kind]int) {
	counts := map[Kind]int{}
	if len(fs) == 0 {
		return v, counts
	}
	byPtr := map[string][]Finding{}
	under := map[string]bool{}
	for _, f := range fs {
		byPtr[f.Pointer] = append(byPtr[f.Pointer], f)
		p := f.Pointer
		for {
			under[p] = true
			i := strings.LastIndexByte(p, '/')
			if i < 0 {
				break
			}
			p = p[:i]
		}
	}
	var rebuild func(v any, ptr string) any
	rebuild = func(v any, ptr string) any {
		if !under[ptr] {
			return v
		}
		switch t := v.(type) {
		case string:
			out, c := redactString(t, byPtr[ptr])
			for k, n := range c {
				counts[k] += n
			}
			return out
		case map[string]any:
			m := make(map[string]any, len(t))
			for k, e := range t {
				m[k] = rebuild(e, ptr+"/"+string(appendToken(nil, k)))
			}
			return m
		case []any:
			a := make([]any, len(t))
			for i, e := range t {
				a[i] = rebuild(e, ptr+"/"+strconv.Itoa(i))
			}
			return a
		}
		return v
	}
	return rebuild(v, ""), counts
}

// redactString replaces the findings' spans in s by their Markers. Spans
// that overlap are merged under the marker of the first (the outermost
// when they start together).
func redactString(s string, fs []Finding) (string, map[Kind]int) {
	counts := map[Kind]int{}
	var ok []Finding
	for _, f := range fs {
		if f.Start >= 0 && f.Start < f.End && f.End <= len(s) {
			ok = append(ok, f)
		}
	}
	if len(ok) == 0 {
		return s, counts
	}
	sort.SliceStable(ok, func(i, j int) bool {
		if ok[i].Start != ok[j].Start {
			return ok[i].Start < ok[j].Start
		}
		return ok[i].End > ok[j].End
	})
	var b strings.Builder
	b.Grow(len(s))
	pos := 0
	for i := 0; i < len(ok); {
		cur := ok[i]
		end := cur.End
		counts[cur.Kind]++
		j := i + 1
		for ; j < len(ok) && ok[j].Start < end; j++ {
			if ok[j].End > end {
				end = ok[j].End
			}
			counts[ok[j].Kind]++
		}
		b.WriteString(s[pos:cur.Start])
		b.WriteString(Marker(cur.Kind))
		pos = end
		i = j
	}
	b.WriteString(s[pos:])
	return b.String(), counts
}

// String describes f without its content, e.g.
// "secret.github_token at /items/0/body [12,52)".
func (f Finding) String() string {
	return fmt.Sprintf("%s at %q [%d,%d)", f.Kind, f.Pointer, f.Start, f.End)
}
