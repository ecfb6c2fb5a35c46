package testutil

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
)

// TarFile is one regular file of a tarball TarBomb writes.
type TarFile struct {
	Name string
	Body []byte
}

// Bomb describes a gzipped tarball that expands far beyond its size. It is
// written as concatenated gzip members (which every gzip reader takes as
// one stream): a block of zeros is compressed once and its member repeated,
// so a bomb of gigabytes costs milliseconds and a few MB to make.
type Bomb struct {
	// Files come first, as they are (a manifest, a signature, policies).
	Files []TarFile
	// Entries files of EntrySize zero bytes each follow, named
	// junk/zN.bin.
	Entries   int
	EntrySize int64
	// Huge, when above 0, adds one file of Huge zero bytes, junk/huge.bin.
	Huge int64
}

// zeroBlock is the size of the block of zeros compressed once.
const zeroBlock = 1 << 20

// Tarball writes b.
func (b Bomb) Tarball() []byte {
	var out bytes.Buffer
	// One writer, Reset for each member: a new one per member costs its
	// compressor's state each time, which under the race detector made a
	// bomb of 512 entries take a second to write.
	mw, _ := gzip.NewWriterLevel(&out, gzip.BestCompression)
	member := func(p []byte) {
		mw.Reset(&out)
		mw.Write(p)
		mw.Close()
	}
	var head bytes.Buffer
	tw := tar.NewWriter(&head)
	for _, f := range b.Files {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.Name, Size: int64(len(f.Body)), Mode: 0o644})
		tw.Write(f.Body)
	}
	tw.Flush()
	member(head.Bytes())

	var zb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&zb, gzip.BestCompression)
	zw.Write(make([]byte, zeroBlock))
	zw.Close()
	zeros := zb.Bytes()
	data := func(n int64) {
		for ; n >= zeroBlock; n -= zeroBlock {
			out.Write(zeros)
		}
		if n > 0 {
			member(make([]byte, n))
		}
	}
	header := func(name string, size int64) {
		var h bytes.Buffer
		tw := tar.NewWriter(&h)
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: 0o644})
		member(h.Bytes()) // a PAX record comes first when size needs one
	}
	pad := func(size int64) {
		if r := size % 512; r != 0 {
			member(make([]byte, 512-r))
		}
	}
	for i := range b.Entries {
		header(fmt.Sprintf("junk/z%d.bin", i), b.EntrySize)
		data(b.EntrySize)
		pad(b.EntrySize)
	}
	if b.Huge > 0 {
		header("junk/huge.bin", b.Huge)
		data(b.Huge)
		pad(b.Huge)
	}
	member(make([]byte, 1024)) // the end of the archive
	return out.Bytes()
}

// ManyEntries writes a gzipped tarball of n empty files: a member of
// 1,000 headers is compressed once and repeated.
func ManyEntries(n int) []byte {
	var h bytes.Buffer
	tw := tar.NewWriter(&h)
	for i := range 1000 {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: fmt.Sprintf("junk/e%d", i), Mode: 0o644})
	}
	tw.Flush()
	var m bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&m, gzip.BestCompression)
	zw.Write(h.Bytes())
	zw.Close()
	var out bytes.Buffer
	out.Grow((n+999)/1000*m.Len() + 64)
	for range (n + 999) / 1000 {
		out.Write(m.Bytes())
	}
	zw = gzip.NewWriter(&out)
	zw.Write(make([]byte, 1024))
	zw.Close()
	return out.Bytes()
}
