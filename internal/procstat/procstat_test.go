package procstat

import (
	"runtime"
	"testing"
)

// TestPeakRSSGrows checks that the peak follows memory the process touches.
func TestPeakRSSGrows(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/self/status is Linux's")
	}
	before := PeakRSS()
	if before <= 0 {
		t.Fatalf("PeakRSS = %d, want a positive size", before)
	}
	b := make([]byte, 64<<20)
	for i := range b {
		b[i] = 1
	}
	if after := PeakRSS(); after < before+32<<20 {
		t.Errorf("PeakRSS went from %d to %d after touching 64 MiB", before, after)
	}
	runtime.KeepAlive(b)
}
