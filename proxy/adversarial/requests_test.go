package adversarial_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// pyClient is testdata/requests_client.py run by Debian's python3: a
// legacy Python service using the requests library, configured only by its
// environment.
type pyClient struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startPyClient(t *testing.T, proxy string) *pyClient {
	t.Helper()
	script, err := filepath.Abs("testdata/requests_client.py")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(debianPython, script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !strings.HasSuffix(strings.ToLower(k), "_proxy") {
			env = append(env, kv)
		}
	}
	if proxy != "" {
		env = append(env, "HTTP_PROXY="+proxy)
	}
	cmd.Env = append(env, "NO_PROXY=", "PYTHONDONTWRITEBYTECODE=1")
	cmd.Stderr = io.Discard
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the requests client (python3-requests; run scripts/testdeps.sh): %v", err)
	}
	t.Cleanup(func() {
		in.Close()
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	return &pyClient{cmd: cmd, in: in, out: bufio.NewReader(out)}
}

// do sends one call and returns the answer's status and headers as a
// response, or the client's error.
func (p *pyClient) do(call map[string]any) (*http.Response, error) {
	b, err := json.Marshal(call)
	if err != nil {
		return nil, err
	}
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		return nil, err
	}
	line, err := p.out.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("the requests client ended: %w", err)
	}
	var res struct {
		Status  int               `json:"status"`
		Headers map[string]string `json:"headers"`
		Error   string            `json:"error"`
	}
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		return nil, err
	}
	if res.Error != "" {
		return nil, errors.New(res.Error)
	}
	resp := &http.Response{StatusCode: res.Status, Header: http.Header{}}
	for k, v := range res.Headers {
		resp.Header.Set(k, v)
	}
	return resp, nil
}

// requestsAttack is a call as a Python service writes it with requests.
type requestsAttack struct {
	name, point string
	control     bool
	call        func(base string) map[string]any
}

func pyPost(extra map[string]any) func(string) map[string]any {
	return func(base string) map[string]any {
		c := map[string]any{"method": "POST", "url": base + "/v1/tools"}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
}

var requestsAttacks = []requestsAttack{
	{name: "requests-control-json", point: "control", control: true, call: pyPost(map[string]any{"json": map[string]any{"term": "x", "retmax": 5}})},
	{name: "requests-bad-json", point: "control", call: pyPost(map[string]any{"json": map[string]any{"retmax": 500}})},
	{name: "requests-data-string-no-content-type", point: "1", call: pyPost(map[string]any{"data": badJSON})},
	{name: "requests-files", point: "1", call: pyPost(map[string]any{"files": map[string]string{"retmax": "500"}})},
	{name: "requests-data-form", point: "v", call: pyPost(map[string]any{"data": map[string]string{"retmax": "500"}})},
	{name: "requests-params-repeated", point: "v", call: func(base string) map[string]any {
		return map[string]any{"method": "GET", "url": base + "/v1/tools", "params": map[string]any{"retmax": []string{"5", "500"}}}
	}},
	{name: "requests-escaped-path", point: "2", call: func(base string) map[string]any {
		return map[string]any{"method": "GET", "url": base + "/v1/%74ools?" + badQuery}
	}},
}

// TestAdversarialRequests sends attacks from a Python service using the
// requests library, configured as legacy services are: HTTP_PROXY naming
// the forward listener, or a base URL naming a reverse listener.
func TestAdversarialRequests(t *testing.T) {
	w := shared(t)
	g, err := startGate(t, mainConfig(w, "pass"))
	if err != nil {
		t.Fatal(err)
	}
	viaProxy := startPyClient(t, "http://"+g.srv.Addr("forward", 0))
	direct := startPyClient(t, "")
	j := &judge{g: g, o: newOracle(t), w: w}
	rep := newReport()
	for _, a := range requestsAttacks {
		t.Run(a.name, func(t *testing.T) {
			j.t = t
			for _, c := range cells(g, w, "pass") {
				cl, base := viaProxy, "http://"+c.up.authority()
				if c.listener == "reverse" {
					cl, base = direct, "http://"+c.addr
				}
				call := a.call(base)
				trace, tp := newTrace()
				call["headers"] = map[string]string{"Traceparent": tp}
				resp, err := cl.do(call)
				v := j.verdict(trace, resp, err)
				rep.add(t, a.name, a.point, c.String(), v)
				if a.control && (v.reached == 0 || !v.mediated) {
					t.Errorf("%s: control got %s (%s), want it inspected and forwarded to the tool's handler", c, v.outcome, strings.Join(v.notes, "; "))
				}
			}
		})
	}
	rep.print(t, "TestAdversarialRequests")
}
