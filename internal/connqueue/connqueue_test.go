package connqueue

import (
	"errors"
	"net"
	"testing"
)

func TestPushAcceptClose(t *testing.T) {
	l := New("test")
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	got := make(chan net.Conn)
	go func() {
		c, err := l.Accept()
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	if !l.Push(a) {
		t.Fatal("Push to an open listener reported false")
	}
	if c := <-got; c != a {
		t.Fatalf("Accept returned %v, want the pushed connection", c)
	}
	if l.Addr().String() != "test" || l.Addr().Network() != "test" {
		t.Errorf("Addr = %s/%s", l.Addr().Network(), l.Addr())
	}
	l.Close()
	l.Close() // twice is fine
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
	}
	if l.Push(b) {
		t.Error("Push after Close reported true")
	}
}
