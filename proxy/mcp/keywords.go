package mcp

import (
	"slices"
	"sync"
	"time"

	"github.com/toolgate/toolgate/policies"
)

// UnknownKeywordsReason is the event's policy_error word ("schema:
// unknown_keywords") for a call checked by a listed schema that holds
// keywords its draft does not define: those keywords check nothing.
const UnknownKeywordsReason = "unknown_keywords"

// ListedKeywords is a tool whose listed inputSchema holds keywords its
// draft does not define (a typo such as "maxium", or another dialect's
// "nullable"), as /status shows it. The schema still checks calls with
// every other keyword; those check nothing.
type ListedKeywords struct {
	// Server is the MCP server (host and path) and Tool the tool's name.
	Server string `json:"server"`
	Tool   string `json:"tool"`
	// Keywords are the unknown keywords, each as "POINTER: unknown keyword
	// "NAME" (did you mean ...)", at most maxKeywordsShown, in pointer
	// order. They name the schema's places, never an argument value.
	Keywords []string `json:"keywords"`
	// More counts the unknown keywords past Keywords; 0 when none.
	More int `json:"more,omitempty"`
	// Seen is when a call last met them.
	Seen time.Time `json:"seen"`
}

// Bounds of KeywordFindings: the tools remembered (past it, the one
// seen least recently is forgotten) and the keywords shown per tool.
const (
	maxListedKeywords = 100
	maxKeywordsShown  = 20
)

// KeywordFindings remembers the tools whose listed schemas hold
// unknown keywords. The zero value is ready; it is safe for concurrent use.
type KeywordFindings struct {
	mu sync.Mutex
	m  map[[2]string]*ListedKeywords
}

// Note remembers that a call of a server's tool met a listed schema with
// the unknown keywords kw (non-empty), and reports whether they are news:
// the first call to meet them, or a schema listed since with other ones.
// The caller logs and marks the event only then, so they are noted once.
func (f *KeywordFindings) Note(server, tool string, kw []policies.UnknownKeyword) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[[2]string]*ListedKeywords{}
	}
	k := [2]string{server, tool}
	if e := f.m[k]; e != nil && sameKeywords(e, kw) {
		e.Seen = time.Now()
		return false
	}
	makeRoom(f.m, k, maxListedKeywords, func(v *ListedKeywords) time.Time { return v.Seen })
	e := &ListedKeywords{Server: server, Tool: tool, Keywords: KeywordNames(kw), Seen: time.Now()}
	if len(kw) > maxKeywordsShown {
		e.More = len(kw) - maxKeywordsShown
	}
	f.m[k] = e
	return true
}

// sameKeywords reports whether e shows the keywords kw.
func sameKeywords(e *ListedKeywords, kw []policies.UnknownKeyword) bool {
	if len(e.Keywords)+e.More != len(kw) {
		return false
	}
	for i, s := range e.Keywords {
		if kw[i].String() != s {
			return false
		}
	}
	return true
}

// List lists the tools whose listed schemas hold unknown keywords, by
// server and tool, at most 100 (the most recently met).
func (f *KeywordFindings) List() []ListedKeywords {
	f.mu.Lock()
	defer f.mu.Unlock()
	keys := serverToolKeys(f.m)
	out := make([]ListedKeywords, 0, len(keys))
	for _, k := range keys {
		e := *f.m[k]
		e.Keywords = slices.Clone(e.Keywords)
		out = append(out, e)
	}
	return out
}

// KeywordNames lists the keywords of kw, at most maxKeywordsShown, for a
// log line.
func KeywordNames(kw []policies.UnknownKeyword) []string {
	out := make([]string, 0, min(len(kw), maxKeywordsShown))
	for i, u := range kw {
		if i == maxKeywordsShown {
			break
		}
		out = append(out, u.String())
	}
	return out
}
