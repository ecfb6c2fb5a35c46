package tracing

import (
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/section"
)

// Config is the tracing section: where spans go and how many. The zero
// value is valid and means tracing is off; Validate applies the defaults
// of an enabled section.
type Config struct {
	// Endpoint is the OTLP/HTTP collector's URL, such as
	// "http://127.0.0.1:4318". A URL without a path gets OTLP's
	// "/v1/traces". Default "" (tracing off: no span is built and the
	// proxy's cost is one nil check per call).
	Endpoint string `yaml:"endpoint"`
	// Protocol is the OTLP transport: "http/protobuf" or "http/json".
	// Default DefaultProtocol ("http/protobuf"). gRPC is not linked in.
	Protocol string `yaml:"protocol"`
	// SampleRatio is the share of calls without a sampled caller span that
	// get a span, from 0 to 1, decided by trace id. A call whose caller
	// sent a traceparent follows the caller's sampled flag instead
	// (parent-based sampling). Default 1 (every call); 0 traces only the
	// calls whose caller's traceparent is sampled.
	SampleRatio *float64 `yaml:"sample_ratio"`
	// Headers are sent with every export, such as an Authorization for the
	// collector. A value may name environment variables as ${NAME}, expanded
	// once at load; an unset one is an error. Default none.
	Headers map[string]string `yaml:"headers"`
	// Timeout bounds one export (its retries included). A duration such as
	// "5s" in YAML. Default DefaultTimeout (5s); at most MaxTimeout (1m).
	Timeout time.Duration `yaml:"timeout"`
	// QueueSize is how many finished spans wait for export, those being
	// exported included; a span that finds it full is dropped and counted
	// (toolgate_tracing_spans_dropped_total{reason="queue_full"}), and the
	// call is never made to wait. Default DefaultQueueSize (2048); at most
	// MaxQueueSize (1048576).
	QueueSize int `yaml:"queue_size"`
	// BatchSize is the most spans one export carries. Default
	// DefaultBatchSize (512), or QueueSize when that is smaller.
	BatchSize int `yaml:"batch_size"`
	// BatchTimeout is the longest a finished span waits before its batch
	// is exported. A duration such as "1s" in YAML. Default
	// DefaultBatchTimeout (1s).
	BatchTimeout time.Duration `yaml:"batch_timeout"`
	// ServiceName is the spans' service.name. Default DefaultServiceName
	// ("toolgate").
	ServiceName string `yaml:"service_name"`
	// AllowInsecure allows a plain "http://" Endpoint on a host that is not
	// loopback; headers (credentials) and span attributes then cross the
	// network unencrypted. Default false: a remote collector needs https.
	AllowInsecure bool `yaml:"allow_insecure"`

	// Set by Validate.
	url     *url.URL
	ratio   float64
	headers map[string]string
}

// Defaults and bounds of the tracing section.
const (
	DefaultProtocol     = "http/protobuf"
	DefaultTimeout      = 5 * time.Second
	MaxTimeout          = time.Minute
	DefaultQueueSize    = 2048
	MaxQueueSize        = 1 << 20
	DefaultBatchSize    = 512
	DefaultBatchTimeout = time.Second
	DefaultServiceName  = "toolgate"
	// maxHeaders bounds tracing.headers.
	maxHeaders = 32
)

// Enabled reports whether the section turns tracing on.
func (c *Config) Enabled() bool { return c.Endpoint != "" }

// envRef is a ${NAME} reference in a header value.
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// Validate applies the defaults of an enabled section, rejects values out
// of bounds and precomputes the endpoint and headers. A section without an
// endpoint must set nothing else. Errors are *section.Error values at
// "tracing.<field>" paths relative to the section ("endpoint", ...).
func (c *Config) Validate() error {
	if !c.Enabled() {
		if c.Protocol != "" || c.SampleRatio != nil || len(c.Headers) > 0 || c.Timeout != 0 || c.QueueSize != 0 ||
			c.BatchSize != 0 || c.BatchTimeout != 0 || c.ServiceName != "" || c.AllowInsecure {
			return section.Errorf("endpoint", "is required when other tracing settings are given (tracing is off without it)")
		}
		return nil
	}
	u, err := url.Parse(c.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return section.Errorf("endpoint", "must be an http:// or https:// URL with a host and no credentials, query or fragment, such as http://127.0.0.1:4318")
	}
	if u.Scheme == "http" && !c.AllowInsecure && !isLoopback(u.Hostname()) {
		return section.Errorf("endpoint", "plain http to %s would send spans and headers unencrypted; use https, or set tracing.allow_insecure", u.Hostname())
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	c.url = u
	switch c.Protocol {
	case "":
		c.Protocol = DefaultProtocol
	case "http/protobuf", "http/json":
	case "grpc":
		return section.Errorf("protocol", "grpc is not supported; use http/protobuf (the collector's port 4318)")
	default:
		return section.Errorf("protocol", "must be http/protobuf or http/json, got %q", c.Protocol)
	}
	c.ratio = 1
	if c.SampleRatio != nil {
		r := *c.SampleRatio
		if !(r >= 0 && r <= 1) {
			return section.Errorf("sample_ratio", "must be between 0 and 1, got %v", r)
		}
		c.ratio = r
	}
	if len(c.Headers) > maxHeaders {
		return section.Errorf("headers", "at most %d headers, got %d", maxHeaders, len(c.Headers))
	}
	c.headers = make(map[string]string, len(c.Headers))
	for _, k := range slices.Sorted(maps.Keys(c.Headers)) {
		v := c.Headers[k]
		if !validHeaderName(k) {
			return section.Errorf("headers", "%q is not a valid header name", k)
		}
		var unset string
		v = envRef.ReplaceAllStringFunc(v, func(m string) string {
			name := m[2 : len(m)-1]
			val, ok := os.LookupEnv(name)
			if !ok || val == "" {
				unset = name
			}
			return val
		})
		if unset != "" {
			return section.Errorf("headers."+k, "names ${%s}, which is not set", unset)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return section.Errorf("headers."+k, "the value holds a line break or NUL")
		}
		c.headers[http.CanonicalHeaderKey(k)] = v
	}
	switch t := c.Timeout; {
	case t == 0:
		c.Timeout = DefaultTimeout
	case t < 0 || t > MaxTimeout:
		return section.Errorf("timeout", "%s is outside 0 to %s", t, MaxTimeout)
	}
	switch q := c.QueueSize; {
	case q == 0:
		c.QueueSize = DefaultQueueSize
	case q < 0 || q > MaxQueueSize:
		return section.Errorf("queue_size", "%d is outside 1 to %d", q, MaxQueueSize)
	}
	switch b := c.BatchSize; {
	case b == 0:
		c.BatchSize = min(DefaultBatchSize, c.QueueSize)
	case b < 0 || b > c.QueueSize:
		return section.Errorf("batch_size", "%d is outside 1 to queue_size (%d)", b, c.QueueSize)
	}
	switch d := c.BatchTimeout; {
	case d == 0:
		c.BatchTimeout = DefaultBatchTimeout
	case d < 0 || d > MaxTimeout:
		return section.Errorf("batch_timeout", "%s is outside 0 to %s", d, MaxTimeout)
	}
	if c.ServiceName == "" {
		c.ServiceName = DefaultServiceName
	}
	return nil
}

// String names the destination for the log: the endpoint, never the
// headers.
func (c *Config) String() string {
	if !c.Enabled() {
		return "off"
	}
	return fmt.Sprintf("%s (%s, sample ratio %v)", c.Endpoint, c.Protocol, c.ratio)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// validHeaderName reports whether s is an HTTP token (RFC 9110 5.6.2).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}
