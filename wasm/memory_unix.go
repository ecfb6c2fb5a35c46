//go:build unix

package wasm

import "golang.org/x/sys/unix"

// reserveMemory maps n bytes of address space nobody may touch yet; it
// costs no memory until committed.
func reserveMemory(n uint64) ([]byte, error) {
	return unix.Mmap(-1, 0, int(n), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANON)
}

// commitMemory makes buf[from:to] readable and writable. Fresh pages read
// as zeros, as WebAssembly requires of grown memory.
func commitMemory(buf []byte, from, to, _ uint64) ([]byte, error) {
	return buf, unix.Mprotect(buf[from:to], unix.PROT_READ|unix.PROT_WRITE)
}

// releaseMemory unmaps what reserveMemory mapped.
func releaseMemory(buf []byte) { _ = unix.Munmap(buf) }
