package detect

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"regexp"
	"strings"
)

// emitFunc records a finding at [start, end) of the scanned string.
type emitFunc func(k Kind, start, end, score int)

// secretDetector finds one key format. The secret's span is its
// regexp's group 1 when it has one, else the whole match; a span that
// continues a longer token (a token byte right before or after it) is
// not a match. hint is a literal every match contains (a cheap
// prefilter); check, when set, rejects a match that only looks right.
type secretDetector struct {
	kind  Kind
	hint  []string
	re    *regexp.Regexp
	check func(m string) bool
	// dots: "." is a token byte too (JWTs).
	dots bool
	// anywhere: no boundary check (PEM blocks carry their own).
	anywhere bool
}

// find emits every match of the format in s.
func (d secretDetector) find(s string, emit emitFunc) {
	hit := false
	for _, h := range d.hint {
		if strings.Contains(s, h) {
			hit = true
			break
		}
	}
	if !hit {
		return
	}
	for _, m := range d.re.FindAllStringSubmatchIndex(s, -1) {
		start, end := m[0], m[1]
		if len(m) > 2 {
			start, end = m[2], m[3]
		}
		if start < 0 || !(d.anywhere || standalone(s, start, end, d.dots)) || (d.check != nil && !d.check(s[start:end])) {
			continue
		}
		emit(d.kind, start, end, 0)
	}
}

// tokenByte reports whether c can be part of a key: an ASCII letter,
// digit, "_" or "-" (and "." when dots).
func tokenByte(c byte, dots bool) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || dots && c == '.'
}

// standalone reports whether s[start:end] is not part of a longer token.
// (Go's RE2 has no look-around, so the boundaries are checked here.)
func standalone(s string, start, end int, dots bool) bool {
	return (start == 0 || !tokenByte(s[start-1], dots)) && (end == len(s) || !tokenByte(s[end], dots))
}

// secretDetectors are the key formats, in the order they are tried.
var secretDetectors = []secretDetector{
	{
		// AWS access key ids: a 4-letter type prefix and 16 base32
		// characters (AKIA long-term, ASIA temporary, ABIA/ACCA other).
		kind: KindAWSAccessKey,
		hint: []string{"AKIA", "ASIA", "ABIA", "ACCA", "A3T"},
		re:   regexp.MustCompile(`((?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z2-7]{16})`),
	},
	{
		// An AWS secret access key only in context: 40 base64
		// characters right after a name saying it is one.
		kind: KindAWSSecretKey,
		hint: []string{"aws", "AWS", "Aws"},
		re: regexp.MustCompile(`(?i)aws_?(?:secret_?access_?key|secret_?key|secret)["']?\s*[:=]\s*["']?` +
			`([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)`),
		check: func(m string) bool { return entropy(m) >= 4.0 && classes(m) >= 3 },
	},
	{
		// GitHub tokens: ghp_ (personal), gho_ (OAuth), ghu_ (user to
		// server), ghs_ (server to server), ghr_ (refresh) and 36
		// base62 characters; fine-grained github_pat_ tokens.
		kind: KindGitHubToken,
		hint: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"},
		re:   regexp.MustCompile(`((?:gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59}))`),
		check: func(m string) bool {
			return classes(m[strings.LastIndexByte(m, '_')+1:]) >= 2
		},
	},
	{
		// GitLab personal, project and group access tokens.
		kind: KindGitLabToken,
		hint: []string{"glpat-"},
		re:   regexp.MustCompile(`(glpat-[A-Za-z0-9_-]{20,})`),
	},
	{
		// Slack tokens: bot (xoxb), user (xoxp), app-level (xoxa),
		// refresh (xoxr), legacy (xoxo, xoxs): a type, then a team or
		// user number, then more parts.
		kind: KindSlackToken,
		hint: []string{"xox"},
		re:   regexp.MustCompile(`(xox[abposr]-[0-9]{4,}-[A-Za-z0-9-]{8,})`),
	},
	{
		// Stripe live secret and restricted keys (test keys are not
		// secrets worth withholding and are left alone).
		kind: KindStripeKey,
		hint: []string{"_live_"},
		re:   regexp.MustCompile(`((?:sk|rk)_live_[A-Za-z0-9]{24,247})`),
	},
	{
		// Google API keys: AIza and 35 more characters.
		kind: KindGoogleAPIKey,
		hint: []string{"AIza"},
		re:   regexp.MustCompile(`(AIza[0-9A-Za-z_-]{35})`),
	},
	{
		// Anthropic keys: sk-ant-<type><version>-<body>.
		kind: KindAnthropicKey,
		hint: []string{"sk-ant-"},
		re:   regexp.MustCompile(`(sk-ant-[a-z]{3,10}[0-9]{2}-[A-Za-z0-9_-]{32,200})`),
	},
	{
		// OpenAI keys: project (sk-proj-), service account and admin
		// keys, and legacy keys (sk- and 48 characters, which carry
		// "T3BlbkFJ", base64 of "OpenAI", in the middle).
		kind: KindOpenAIKey,
		hint: []string{"sk-"},
		re: regexp.MustCompile(`(sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,250}|` +
			`sk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}|sk-[A-Za-z0-9]{48})`),
		check: func(m string) bool { return classes(m[3:]) >= 3 || strings.Contains(m, "T3BlbkFJ") },
	},
	{
		// PEM and PGP private key blocks, to their END line or, when
		// that is missing (a cut answer), to the end of the string.
		kind:     KindPrivateKey,
		hint:     []string{"PRIVATE KEY"},
		anywhere: true,
		re: regexp.MustCompile(`(?s)(-----BEGIN [A-Z0-9 ]{0,20}PRIVATE KEY(?: BLOCK)?-----` +
			`(?:.*?-----END [A-Z0-9 ]{0,20}PRIVATE KEY(?: BLOCK)?-----|.*))`),
	},
	{
		// JSON Web Tokens: three base64url parts, the first two JSON
		// objects ("eyJ" is base64 of `{"`); the header must decode to
		// an object with "alg". The signature may be empty (alg none).
		kind:  KindJWT,
		hint:  []string{"eyJ"},
		dots:  true,
		re:    regexp.MustCompile(`(eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*)`),
		check: jwtHeader,
	},
}

// jwtHeader reports whether the first part of m decodes to a JSON object
// with an "alg" member.
func jwtHeader(m string) bool {
	head := m[:strings.IndexByte(m, '.')]
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(head, "="))
	if err != nil || len(raw) > 1024 {
		return false
	}
	var h map[string]any
	if json.Unmarshal(raw, &h) != nil {
		return false
	}
	_, ok := h["alg"]
	return ok
}

// secretName matches a member name or assignment that says its value is
// a secret.
const secretName = `(?:password|passwd|passphrase|pwd|secret|client[_-]?secret|api[_-]?key|access[_-]?token|auth[_-]?token|` +
	`refresh[_-]?token|bearer[_-]?token|private[_-]?key|secret[_-]?key)`

var (
	// genericAssign: `password=...`, `api_key: ...`, `"token": "..."`
	// in text; the group is the value.
	genericAssign = regexp.MustCompile(`(?i)(?:^|[^A-Za-z0-9])[A-Za-z0-9]*[_-]?` + secretName +
		`["']?\s*[:=]\s*["']?([^\s"'<>,;&{}()\[\]]{8,128})`)
	genericKey = regexp.MustCompile(`(?i)^[A-Za-z0-9]*[_-]?` + secretName + `$`)
	// bearer: an opaque token after "Bearer" (an echoed Authorization
	// header); JWTs are found as such first.
	bearer = regexp.MustCompile(`(?i)\bbearer\s+([A-Za-z0-9._~+/-]{16,512}=*)`)
)

// findGeneric emits secret.generic for a random-looking value assigned to
// a secret's name in text or following "Bearer", and for a whole string that is the value of a
// member with such a name (key) and looks random.
func findGeneric(s, key string, emit emitFunc) {
	if key != "" && len(s) >= 8 && len(s) <= 256 && genericKey.MatchString(key) && randomLooking(s) {
		emit(KindSecretGeneric, 0, len(s), 0)
		return
	}
	if strings.Contains(s, "earer") {
		for _, m := range bearer.FindAllStringSubmatchIndex(s, -1) {
			if randomLooking(s[m[2]:m[3]]) {
				emit(KindSecretGeneric, m[2], m[3], 0)
			}
		}
	}
	if !strings.ContainsAny(s, ":=") || !hasSecretWord(s) {
		return
	}
	for _, m := range genericAssign.FindAllStringSubmatchIndex(s, -1) {
		v := s[m[2]:m[3]]
		if randomLooking(v) {
			emit(KindSecretGeneric, m[2], m[3], 0)
		}
	}
}

// randomLooking is the false-positive cut of secret.generic: no spaces,
// not a placeholder, a redaction marker or a variable reference, at least
// three character classes, and at least 3 bits of entropy per character.
func randomLooking(v string) bool {
	if strings.ContainsAny(v, " \t\n") || strings.Contains(v, "[redacted:") ||
		strings.HasPrefix(v, "$") || strings.HasPrefix(v, "%") || strings.HasPrefix(v, "<") {
		return false
	}
	lv := strings.ToLower(v)
	for _, p := range []string{"xxxx", "****", "....", "changeme", "example", "password", "redacted", "placeholder", "your_", "your-", "dummy"} {
		if strings.Contains(lv, p) {
			return false
		}
	}
	return classes(v) >= 3 && entropy(v) >= 3.0
}

// classes counts the character classes in s: lower, upper, digit, other.
func classes(s string) int {
	var l, u, d, o int
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z':
			l = 1
		case c >= 'A' && c <= 'Z':
			u = 1
		case c >= '0' && c <= '9':
			d = 1
		default:
			o = 1
		}
	}
	return l + u + d + o
}

// entropy is the Shannon entropy of s's bytes, in bits per byte.
func entropy(s string) float64 {
	if s == "" {
		return 0
	}
	var n [256]int
	for i := 0; i < len(s); i++ {
		n[s[i]]++
	}
	var h float64
	for _, c := range n {
		if c > 0 {
			p := float64(c) / float64(len(s))
			h -= p * math.Log2(p)
		}
	}
	return h
}

// hasSecretWord reports whether s holds a word secretName starts with
// (a prefilter: the assignment regexp is slow on long text).
func hasSecretWord(s string) bool {
	l := strings.ToLower(s)
	for _, w := range []string{"pass", "pwd", "secret", "key", "token"} {
		if strings.Contains(l, w) {
			return true
		}
	}
	return false
}
