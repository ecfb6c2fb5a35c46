//go:build !unix

package wasm

// reserveMemory reserves nothing where toolgate does not map memory
// itself: commitMemory grows a Go slice instead.
func reserveMemory(uint64) ([]byte, error) { return []byte{}, nil }

// commitMemory grows buf to to bytes, doubling its capacity (up to the
// limit) so the copies of a memory grown a page at a time add up to less
// than twice its size.
func commitMemory(buf []byte, from, to, limit uint64) ([]byte, error) {
	if to <= uint64(cap(buf)) {
		return buf[:cap(buf)], nil
	}
	c := min(max(to, 2*uint64(cap(buf))), limit)
	b := make([]byte, c)
	copy(b, buf[:from])
	return b, nil
}

func releaseMemory([]byte) {}
