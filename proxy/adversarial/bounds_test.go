package adversarial_test

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// boundsLimits are the gate's limits in TestAdversarialBounds: short, so
// the attacks end quickly.
const boundsLimits = "limits: {read_header_timeout: 1s, body_timeout: 1s}\n"

// boundsHeadroom is how long past its limit a held connection may take to
// be cut off on a loaded machine before the test calls it unbounded.
const boundsHeadroom = 9 * time.Second

// slowAttack writes head at once, then trickle one byte every gap (a
// caller holding the connection), and expects toolgate to answer or close
// the connection within its limit.
type slowAttack struct {
	name    string
	head    string // {AUTH} and {TP} are replaced
	trickle string
	gap     time.Duration
}

var slowAttacks = []slowAttack{
	{name: "slow-body-json", gap: 250 * time.Millisecond,
		head:    "POST http://{AUTH}/v1/tools HTTP/1.1\r\nHost: {AUTH}\r\nTraceparent: {TP}\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n",
		trickle: `{"term":"x","retmax":500,"evil":1,"pad":"` + strings.Repeat("a", 200)},
	{name: "slow-body-text-plain", gap: 250 * time.Millisecond,
		head:    "POST http://{AUTH}/v1/tools HTTP/1.1\r\nHost: {AUTH}\r\nTraceparent: {TP}\r\nContent-Type: text/plain\r\nContent-Length: 200\r\n\r\n",
		trickle: `{"retmax":500,"evil":1,"pad":"` + strings.Repeat("a", 200)},
	{name: "chunked-body-never-ends", gap: time.Hour,
		head: "POST http://{AUTH}/v1/tools HTTP/1.1\r\nHost: {AUTH}\r\nTraceparent: {TP}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"e\r\n{\"retmax\":500,\r\n"},
	{name: "slow-headers", gap: 250 * time.Millisecond,
		head:    "POST http://{AUTH}/v1/tools?retmax=500 HTTP/1.1\r\nTraceparent: {TP}\r\n",
		trickle: "Host: {AUTH}\r\nX-Pad: " + strings.Repeat("a", 200) + "\r\n\r\n"},
}

// TestAdversarialBounds checks point 6 of issue 13: a caller cannot hold a
// connection to a tool with a body or headers that never end (the
// connection is answered or closed within limits.body_timeout or
// limits.read_header_timeout, plus generous headroom for a loaded
// machine), and no part of such a body reaches the tool's handler.
func TestAdversarialBounds(t *testing.T) {
	w := shared(t)
	mini := &world{ups: w.ups[:1]}
	g, err := startGate(t, mainConfig(mini, "pass")+boundsLimits)
	if err != nil {
		t.Fatalf("toolgate must bound slow callers (limits.body_timeout, limits.read_header_timeout): %v", err)
	}
	j := &judge{g: g, o: newOracle(t), w: w}
	forward := g.srv.Addr("forward", 0)
	rep := newReport()
	for _, a := range slowAttacks {
		t.Run(a.name, func(t *testing.T) {
			j.t = t
			trace, tp := newTrace()
			expand := strings.NewReplacer("{AUTH}", w.ups[0].authority(), "{TP}", tp).Replace
			start := time.Now()
			limit := time.Second + boundsHeadroom
			held, err := holdOpen(forward, expand(a.head), expand(a.trickle), a.gap, limit)
			took := time.Since(start)
			v := j.verdict(trace, nil, fmt.Errorf("held %v", took.Round(time.Millisecond)))
			if held {
				v.leaks = append(v.leaks, fmt.Sprintf("the connection was still open after %v", limit))
				v.outcome = outLeaked
			}
			if err != nil {
				v.notes = append(v.notes, shorten(err.Error(), 80))
			}
			rep.add(t, a.name, "6", "go/forward/pass", v)
		})
	}
	rep.print(t, "TestAdversarialBounds")
}

// holdOpen writes head, then trickle one byte every gap, until toolgate
// answers or closes the connection, or limit passes (held is then true).
func holdOpen(addr, head, trickle string, gap, limit time.Duration) (held bool, err error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return false, err
	}
	defer c.Close()
	if _, err := c.Write([]byte(head)); err != nil {
		return false, err
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		for i := 0; i < len(trickle); i++ {
			select {
			case <-done:
				return
			case <-time.After(gap):
			}
			if _, err := c.Write([]byte{trickle[i]}); err != nil {
				return
			}
		}
	}()
	c.SetReadDeadline(time.Now().Add(limit))
	buf := make([]byte, 4096)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue // an answer (a refusal): read on until toolgate closes
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return true, nil
		}
		return false, nil
	}
}
