package testutil

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"
)

// StartNodeServer runs script (in folder dir) under node until the test
// ends, and returns the origin it serves (http://127.0.0.1:PORT). The
// script prints "listening <port>" once it listens on 127.0.0.1, and exits
// when its stdin closes. The test is skipped when node is not installed.
func StartNodeServer(t testing.TB, dir, script string, env ...string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		Missing(t, "node is not installed; the TypeScript MCP SDK tests need Node 20 or later (scripts/testdeps.sh installs the SDK when node is present)")
	}
	cmd := exec.Command(node, script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe() // the server exits when its stdin closes
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		io.Copy(io.Discard, stdout)
	}()
	select {
	case l := <-line:
		var port int
		if _, err := fmt.Sscanf(l, "listening %d", &port); err != nil {
			t.Fatalf("%s said %q", script, l)
		}
		return fmt.Sprintf("http://127.0.0.1:%d", port)
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not start within 60s", script)
	}
	return ""
}
