package h1serve

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestHammerWatch runs many connections of pipelined and sequential
// calls whose handlers take around WatchAfter, so the watch starts,
// finds a body half-read, and is stopped at every point of a request;
// each answer must echo its own request.
func TestHammerWatch(t *testing.T) {
	s := &Server{WatchAfter: time.Millisecond, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d, _ := strconv.Atoi(r.URL.Query().Get("sleep")); d > 0 {
			time.Sleep(time.Duration(d) * 100 * time.Microsecond)
		}
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		if r.URL.Query().Get("flush") == "1" {
			w.Write([]byte(r.URL.Path + ":"))
			http.NewResponseController(w).Flush()
		} else {
			w.Write([]byte(r.URL.Path + ":"))
		}
		w.Write(b)
	})}
	addr := startLoop(t, s)
	const conns, calls = 8, 60
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			c, err := net.Dial("tcp", addr)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(60 * time.Second))
			br := bufio.NewReader(c)
			for j := 0; j < calls; {
				batch := 1 + rng.IntN(3) // pipelined requests sent at once
				var out bytes.Buffer
				var want []string
				for k := 0; k < batch && j < calls; k++ {
					path := fmt.Sprintf("/c%d/r%d", i, j)
					body := bytes.Repeat([]byte{byte('a' + j%26)}, rng.IntN(6000))
					q := fmt.Sprintf("?sleep=%d&flush=%d", rng.IntN(25), rng.IntN(2))
					if rng.IntN(2) == 0 {
						fmt.Fprintf(&out, "POST %s%s HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n", path, q, len(body))
						out.Write(body)
					} else {
						fmt.Fprintf(&out, "POST %s%s HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", path, q)
						if len(body) > 0 {
							fmt.Fprintf(&out, "%x\r\n%s\r\n", len(body), body)
						}
						out.WriteString("0\r\n\r\n")
					}
					want = append(want, path+":"+string(body))
					j++
				}
				if _, err := c.Write(out.Bytes()); err != nil {
					errs <- err
					return
				}
				for _, w := range want {
					res, err := http.ReadResponse(br, nil)
					if err != nil {
						errs <- err
						return
					}
					b, err := io.ReadAll(res.Body)
					if err != nil || string(b) != w {
						errs <- fmt.Errorf("answer %.40q (err %v), want %.40q", b, err, w)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if served, handed := s.Stats(); served != conns*calls || handed != 0 {
		t.Errorf("served %d, handed off %d; want %d and 0", served, handed, conns*calls)
	}
}
