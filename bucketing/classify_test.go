package bucketing_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bucketing"
)

// now is the clock every test classifies against.
var now = time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)

// view is a Result flattened into something == can compare: RetryAfter is
// -1 when RetryAfterMS is nil.
type view struct {
	Code       bucketing.Code
	Class      bucketing.Class
	Reason     string
	Retryable  bool
	RetryAfter int64
	Detail     string
}

func viewOf(r bucketing.Result) view {
	v := view{r.Code, r.Class, r.Reason, r.Retryable, -1, r.Detail}
	if r.RetryAfterMS != nil {
		v.RetryAfter = *r.RetryAfterMS
	}
	return v
}

func retryAfter(v string) http.Header { return http.Header{"Retry-After": {v}} }

func TestClassifyStatus(t *testing.T) {
	ok := view{RetryAfter: -1}
	tests := []struct {
		name   string
		status int
		header http.Header
		want   view
	}{
		{"100 continue", 100, nil, ok},
		{"101 switching protocols", 101, nil, ok},
		{"200 ok", 200, nil, ok},
		{"204 no content", 204, nil, ok},
		{"200 with retry-after stays ok", 200, retryAfter("5"), ok},
		{"301 moved", 301, nil, ok},
		{"304 not modified", 304, nil, ok},
		{"399 unnamed redirect", 399, nil, ok},
		{"400 bad request", 400, nil, view{bucketing.CodeValidation, bucketing.ClassUser, "status_4xx", false, -1,
			"upstream answered 400 Bad Request"}},
		{"401 unauthorized", 401, nil, view{bucketing.CodeAuth, bucketing.ClassTerminal, "status_401", false, -1,
			"upstream answered 401 Unauthorized"}},
		{"403 forbidden", 403, nil, view{bucketing.CodeAuth, bucketing.ClassUser, "status_403", false, -1,
			"upstream answered 403 Forbidden"}},
		{"404 not found", 404, nil, view{bucketing.CodeValidation, bucketing.ClassUser, "status_4xx", false, -1,
			"upstream answered 404 Not Found"}},
		{"422 unprocessable", 422, nil, view{bucketing.CodeValidation, bucketing.ClassUser, "status_4xx", false, -1,
			"upstream answered 422 Unprocessable Entity"}},
		{"429 without retry-after", 429, nil, view{bucketing.CodeRateLimit, bucketing.ClassTransient, "status_429", true, -1,
			"upstream answered 429 Too Many Requests"}},
		{"429 with retry-after seconds", 429, retryAfter("2"), view{bucketing.CodeRateLimit, bucketing.ClassTransient, "status_429", true, 2000,
			"upstream answered 429 Too Many Requests; retry after 2s"}},
		{"429 with retry-after date", 429, retryAfter("Fri, 14 Mar 2025 12:01:30 GMT"), view{bucketing.CodeRateLimit, bucketing.ClassTransient, "status_429", true, 90000,
			"upstream answered 429 Too Many Requests; retry after 90s"}},
		{"429 with garbage retry-after", 429, retryAfter("soon"), view{bucketing.CodeRateLimit, bucketing.ClassTransient, "status_429", true, -1,
			"upstream answered 429 Too Many Requests"}},
		{"499 unnamed client error", 499, nil, view{bucketing.CodeValidation, bucketing.ClassUser, "status_4xx", false, -1,
			"upstream answered 499"}},
		{"500 internal", 500, nil, view{bucketing.CodeUpstream, bucketing.ClassTransient, "status_5xx", true, -1,
			"upstream answered 500 Internal Server Error"}},
		{"502 bad gateway", 502, nil, view{bucketing.CodeUpstream, bucketing.ClassTransient, "status_5xx", true, -1,
			"upstream answered 502 Bad Gateway"}},
		{"503 unavailable", 503, nil, view{bucketing.CodeUpstream, bucketing.ClassTransient, "status_5xx", true, -1,
			"upstream answered 503 Service Unavailable"}},
		{"503 with retry-after", 503, retryAfter("120"), view{bucketing.CodeUpstream, bucketing.ClassTransient, "status_5xx", true, 120000,
			"upstream answered 503 Service Unavailable; retry after 120s"}},
		{"504 gateway timeout", 504, nil, view{bucketing.CodeUpstream, bucketing.ClassTransient, "status_5xx", true, -1,
			"upstream answered 504 Gateway Timeout"}},
		{"599 unnamed server error", 599, nil, view{bucketing.CodeUpstream, bucketing.ClassTransient, "status_5xx", true, -1,
			"upstream answered 599"}},
		{"400 with retry-after", 400, retryAfter("1"), view{bucketing.CodeValidation, bucketing.ClassUser, "status_4xx", false, 1000,
			"upstream answered 400 Bad Request; retry after 1s"}},
		{"600 out of range", 600, nil, view{bucketing.CodeUnknown, bucketing.ClassTerminal, "unexpected_status", false, -1,
			"upstream answered with unexpected status 600"}},
		{"99 below range", 99, nil, view{bucketing.CodeUnknown, bucketing.ClassTerminal, "unexpected_status", false, -1,
			"upstream answered with unexpected status 99"}},
		{"0 without error", 0, nil, view{bucketing.CodeUnknown, bucketing.ClassTerminal, "unexpected_status", false, -1,
			"upstream gave no status and no error"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := bucketing.Classify(bucketing.Outcome{Status: tt.status, Header: tt.header}, nil, now)
			if v := viewOf(got); v != tt.want {
				t.Errorf("Classify(%d) = %+v, want %+v", tt.status, v, tt.want)
			}
			if got.OK() != (tt.want.Code == bucketing.CodeNone) {
				t.Errorf("OK() = %v, want %v", got.OK(), tt.want.Code == bucketing.CodeNone)
			}
		})
	}
}

// transportError makes a call that fails in a given way, for real where
// that is cheap, and returns the status that arrived (if any) and the error.
type transportError func(t *testing.T) (int, error)

func TestClassifyTransport(t *testing.T) {
	tests := []struct {
		name   string
		call   transportError
		code   bucketing.Code
		class  bucketing.Class
		reason string
		detail string // "" when the detail depends on the platform
	}{
		{"connection refused", refusedCall, bucketing.CodeUpstream, bucketing.ClassTransient, "connect",
			"upstream refused the connection"},
		{"context deadline before the answer", deadlineCall, bucketing.CodeUpstream, bucketing.ClassTransient, "timeout",
			"upstream did not answer within the timeout"},
		{"client timeout before the answer", clientTimeoutCall, bucketing.CodeUpstream, bucketing.ClassTransient, "timeout",
			"upstream did not answer within the timeout"},
		{"deadline while reading the body", slowBodyCall, bucketing.CodeUpstream, bucketing.ClassTransient, "timeout",
			"upstream's answer was cut short by the timeout"},
		{"canceled before the answer", canceledCall, bucketing.CodeUpstream, bucketing.ClassTransient, "canceled",
			"the call was canceled before upstream answered"},
		{"body shorter than content-length", shortBodyCall, bucketing.CodeUpstream, bucketing.ClassTransient, "truncated",
			"upstream's answer was cut short"},
		{"closed without answering", hangUpCall, bucketing.CodeUpstream, bucketing.ClassTransient, "connect",
			"upstream closed the connection without answering"},
		{"reset before answering", resetCall, bucketing.CodeUpstream, bucketing.ClassTransient, "connect", ""},
		{"untrusted certificate", untrustedTLSCall, bucketing.CodeUpstream, bucketing.ClassTerminal, "tls",
			"upstream's TLS certificate was not accepted: it is signed by an authority toolgate does not trust (tls.upstream_ca adds one)"},
		{"certificate for another name", wrongNameTLSCall, bucketing.CodeUpstream, bucketing.ClassTerminal, "tls",
			"upstream's TLS certificate was not accepted: it is not valid for the host called"},
		{"bare ECONNRESET", fixed(0, &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}),
			bucketing.CodeUpstream, bucketing.ClassTransient, "connect", "upstream reset the connection before answering"},
		{"reset mid-body", fixed(200, &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}),
			bucketing.CodeUpstream, bucketing.ClassTransient, "truncated", "upstream's answer was cut short"},
		{"unknown host", fixed(0, fmt.Errorf("dial: %w", &net.DNSError{Err: "no such host", Name: "nowhere.invalid", IsNotFound: true})),
			bucketing.CodeUpstream, bucketing.ClassTransient, "connect", "upstream's host name could not be resolved"},
		{"unrecognised error", fixed(0, errors.New("something odd")),
			bucketing.CodeUpstream, bucketing.ClassTransient, "connect", "upstream could not be reached"},
		{"os deadline", fixed(0, os.ErrDeadlineExceeded),
			bucketing.CodeUpstream, bucketing.ClassTransient, "timeout", "upstream did not answer within the timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, err := tt.call(t)
			t.Logf("status %d, error %v", status, err)
			if err == nil {
				t.Fatal("the call did not fail")
			}
			o := bucketing.Outcome{Status: status, Err: err, Header: retryAfter("3")}
			got := bucketing.Classify(o, bucketing.Rules{{Status: 200, Code: bucketing.CodeAuth}}, now)
			if got.Code != tt.code || got.Class != tt.class || got.Reason != tt.reason {
				t.Errorf("Classify(%v) = %s/%s/%s, want %s/%s/%s", err, got.Code, got.Class, got.Reason, tt.code, tt.class, tt.reason)
			}
			wantDetail := tt.detail + "; retry after 3s"
			if tt.detail != "" && got.Detail != wantDetail {
				t.Errorf("Detail = %q, want %q (error %v)", got.Detail, wantDetail, err)
			}
			if got.Retryable != (tt.class == bucketing.ClassTransient) {
				t.Errorf("Retryable = %v, want %v", got.Retryable, tt.class == bucketing.ClassTransient)
			}
		})
	}
}

func fixed(status int, err error) transportError {
	return func(*testing.T) (int, error) { return status, err }
}

// get sends a GET with ctx through client, reads the body, and returns the
// status and the first error, as the proxy would see them.
func get(ctx context.Context, client *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

// freshClient returns a client that never reuses connections between tests.
func freshClient(t *testing.T) *http.Client {
	tr := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func refusedCall(t *testing.T) (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return get(t.Context(), freshClient(t), "http://"+addr+"/")
}

// stallingServer answers nothing until the request is done or the test ends.
func stallingServer(t *testing.T) *httptest.Server {
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	return srv
}

func deadlineCall(t *testing.T) (int, error) {
	srv := stallingServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	return get(ctx, freshClient(t), srv.URL)
}

func clientTimeoutCall(t *testing.T) (int, error) {
	srv := stallingServer(t)
	client := freshClient(t)
	client.Timeout = 50 * time.Millisecond
	return get(t.Context(), client, srv.URL)
}

func canceledCall(t *testing.T) (int, error) {
	srv := stallingServer(t)
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)
	return get(ctx, freshClient(t), srv.URL)
}

func slowBodyCall(t *testing.T) (int, error) {
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	return get(ctx, freshClient(t), srv.URL)
}

// rawServer accepts connections and hands each to handle, after reading the
// request head.
func rawServer(t *testing.T, handle func(net.Conn)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				handle(c)
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/"
}

func shortBodyCall(t *testing.T) (int, error) {
	url := rawServer(t, func(c net.Conn) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nContent-Type: text/plain\r\n\r\nonly part")
	})
	return get(t.Context(), freshClient(t), url)
}

func hangUpCall(t *testing.T) (int, error) {
	url := rawServer(t, func(net.Conn) {})
	return get(t.Context(), freshClient(t), url)
}

func resetCall(t *testing.T) (int, error) {
	url := rawServer(t, func(c net.Conn) {
		c.(*net.TCPConn).SetLinger(0) // close sends RST
	})
	return get(t.Context(), freshClient(t), url)
}

// wrongNameTLSCall calls a server whose certificate the client trusts, by
// a name the certificate does not hold.
func wrongNameTLSCall(t *testing.T) (int, error) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the failed handshake is expected
	srv.StartTLS()
	t.Cleanup(srv.Close)
	c := srv.Client()
	tr := c.Transport.(*http.Transport)
	tr.DisableKeepAlives = true
	tr.TLSClientConfig.ServerName = "not-this-host.example"
	return get(t.Context(), c, srv.URL)
}

func untrustedTLSCall(t *testing.T) (int, error) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the failed handshake is expected
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return get(t.Context(), freshClient(t), srv.URL) // the client does not trust the test CA
}
