//go:build linux

package fsync_test

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// residentAfterDontNeed tells the kernel f's first size bytes will not be
// needed (it drops their clean pages from memory) and counts the pages
// still resident.
func residentAfterDontNeed(t *testing.T, f *os.File, size int) int {
	t.Helper()
	if err := unix.Fadvise(int(f.Fd()), 0, int64(size), unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (size+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}
