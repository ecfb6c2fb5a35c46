package main

import (
	"os"
	"runtime/debug"
)

// defaultGCPercent is the garbage collector's target (GOGC) of a running
// sidecar when the environment does not set GOGC. The live heap of a
// sidecar is small (configuration, prepared policies, the event queue) and
// each call allocates a few KiB, so Go's default of 100 collects often: in
// external runs of the schema + Rego route (docs/performance.md), 200 cut
// toolgate's CPU per call by about a sixth, and 400 gave no more. A
// GOMEMLIMIT in the environment still bounds the heap, whatever this says.
const defaultGCPercent = 200

// tuneGC sets the collector's target to defaultGCPercent unless GOGC is
// set in the environment, which then wins.
func tuneGC() {
	if _, ok := os.LookupEnv("GOGC"); ok {
		return
	}
	debug.SetGCPercent(defaultGCPercent)
}
