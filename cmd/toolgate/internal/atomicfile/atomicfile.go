// Package atomicfile writes a file the commands produce (a CA bundle, a
// built policy) so that a reader never sees half of it and a failed write
// leaves the file as it was.
package atomicfile

import (
	"io/fs"
	"os"
	"path/filepath"
)

// Write writes name through a temporary file in its folder and a
// rename, with exactly mode, so a reader never sees half a bundle.
func Write(name string, data []byte, mode fs.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
