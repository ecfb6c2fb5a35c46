package detect

import (
	"regexp"
	"strings"
)

var (
	// emailRE is a pragmatic address: a dot-atom local part and a
	// domain of labels with a letter TLD. The group is the address.
	emailRE = regexp.MustCompile(`[A-Za-z0-9._%+-]{1,64}@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.){1,8}[A-Za-z]{2,24}`)

	// phoneRE: E.164 ("+" and 7 to 15 digits, separators allowed), or a
	// national number written with separators: North American
	// ((415) 555-0132, 415-555-0132, 415.555.0132), and 0-prefixed
	// trunk numbers in groups (06 12 34 56 78, 020 7946 0958,
	// 030-1234-5678). The group is the number.
	phoneRE = regexp.MustCompile(`(?:` +
		`\+[1-9][0-9]{0,3}(?:[ .-]?\(?[0-9]{1,5}\)?){2,6}` +
		`|\(?[2-9][0-9]{2}\)[ .-]?[2-9][0-9]{2}[ .-][0-9]{4}` +
		`|[2-9][0-9]{2}[.-][2-9][0-9]{2}[.-][0-9]{4}` +
		`|0[1-9][0-9]{0,3}(?:[ .-][0-9]{2,4}){2,4}` +
		`)`)
)

// findEmails emits pii.email for each address in s.
func findEmails(s string, emit emitFunc) {
	if !strings.Contains(s, "@") {
		return
	}
	for _, m := range emailRE.FindAllStringIndex(s, -1) {
		a := s[m[0]:m[1]]
		at := strings.IndexByte(a, '@')
		if a[0] == '.' || a[at-1] == '.' || strings.Contains(a[:at], "..") ||
			(m[1] < len(s) && (tokenByte(s[m[1]], false) || s[m[1]] == '@')) {
			continue
		}
		emit(KindEmail, m[0], m[1], 0)
	}
}

// findPhones emits pii.phone for each number in s that has 8 to 15
// digits (7 to 15 after a "+") and is not one digit repeated.
func findPhones(s string, emit emitFunc) {
	digits := 0
	for i := 0; i < len(s) && digits < 7; i++ {
		if s[i] >= '0' && s[i] <= '9' {
			digits++
		}
	}
	if digits < 7 {
		return
	}
	for _, m := range phoneRE.FindAllStringIndex(s, -1) {
		p := strings.TrimRight(s[m[0]:m[1]], " .-")
		end := m[0] + len(p)
		// Not inside a longer number or token. A "+" number may follow a
		// letter: a redaction marker or an address can end right before
		// it ("ann@example.com+4420...").
		if m[0] > 0 && (s[m[0]-1] >= '0' && s[m[0]-1] <= '9' || strings.IndexByte("+./-_", s[m[0]-1]) >= 0 ||
			alnum(s[m[0]-1]) && s[m[0]] != '+') {
			continue
		}
		if end < len(s) && (alnum(s[end]) || s[end] == '_' ||
			(strings.IndexByte("./-", s[end]) >= 0 && end+1 < len(s) && s[end+1] >= '0' && s[end+1] <= '9')) {
			continue
		}
		n, same := 0, true
		for i := 0; i < len(p); i++ {
			if c := p[i]; c >= '0' && c <= '9' {
				if n > 0 && c != firstDigit(p) {
					same = false
				}
				n++
			}
		}
		min := 8
		if p[0] == '+' {
			min = 7
		}
		if n < min || n > 15 || same || strings.Count(p, "(") != strings.Count(p, ")") {
			continue
		}
		emit(KindPhone, m[0], end, 0)
	}
}

// firstDigit returns the first ASCII digit of p.
func firstDigit(p string) byte {
	for i := 0; i < len(p); i++ {
		if p[i] >= '0' && p[i] <= '9' {
			return p[i]
		}
	}
	return 0
}

// alnum reports whether c is an ASCII letter or digit.
func alnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
