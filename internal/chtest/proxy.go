package chtest

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// CuttingProxy is a TCP proxy between a client and a server that can lose the
// server's next reply: the fault where the server has committed an insert but
// the client never sees the acknowledgement. Everything is forwarded in both
// directions until CutNextReply arms it; then the next bytes the server sends,
// on any connection, are swallowed and both sides of that connection are
// closed, so the client's read fails. The server's work is done by then.
//
// With clickhouse-go, arm it between PrepareBatch (whose reply, the table's
// sample block, must pass) and Send: the next reply is the one to the data.
type CuttingProxy struct {
	target string
	ln     net.Listener
	armed  atomic.Bool
	cuts   atomic.Int64

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewCuttingProxy listens on a free port of 127.0.0.1 and forwards every
// connection to target. It is closed, with all its connections, in t.Cleanup.
func NewCuttingProxy(t testing.TB, target string) *CuttingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("chtest: cutting proxy: %v", err)
	}
	p := &CuttingProxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr returns the address clients dial instead of the target.
func (p *CuttingProxy) Addr() string { return p.ln.Addr().String() }

// CutNextReply arms the proxy: the next chunk of bytes any server connection
// sends is swallowed and that connection is closed on both sides. It disarms
// itself after one cut.
func (p *CuttingProxy) CutNextReply() { p.armed.Store(true) }

// Cuts returns how many replies the proxy has swallowed.
func (p *CuttingProxy) Cuts() int { return int(p.cuts.Load()) }

func (p *CuttingProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			client.Close()
			continue
		}
		if !p.track(client, server) {
			return
		}
		p.wg.Add(2)
		go p.pipe(server, client, false)
		go p.pipe(client, server, true)
	}
}

// track records a connection pair so close can end it; false when closed.
func (p *CuttingProxy) track(client, server net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		client.Close()
		server.Close()
		return false
	}
	p.conns[client] = struct{}{}
	p.conns[server] = struct{}{}
	return true
}

// hangUp closes both sides of a connection pair.
func (p *CuttingProxy) hangUp(a, b net.Conn) {
	a.Close()
	b.Close()
	p.mu.Lock()
	delete(p.conns, a)
	delete(p.conns, b)
	p.mu.Unlock()
}

// pipe copies src to dst until either side fails, then closes both. In the
// server-to-client direction (cut set), an armed proxy drops the chunk it has
// just read instead.
func (p *CuttingProxy) pipe(dst, src net.Conn, cut bool) {
	defer p.wg.Done()
	defer p.hangUp(dst, src)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if cut && p.armed.CompareAndSwap(true, false) {
				p.cuts.Add(1) // counted before the client can see the cut
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *CuttingProxy) close() {
	p.mu.Lock()
	p.closed = true
	p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
