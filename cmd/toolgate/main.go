// Command toolgate is the tool-call sidecar: it intercepts a tool process's
// outgoing calls, checks their arguments, forwards what passes, answers in
// one envelope, and records one event per call.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
