//go:build !linux

package sink

import (
	"errors"
	"os"
)

// mapSegment is not supported here: segments are appended with write(2).
func mapSegment(*os.File, int) ([]byte, error) {
	return nil, errors.ErrUnsupported
}

func unmapSegment([]byte) error { return nil }

func populateSegment([]byte) error { return errors.ErrUnsupported }

func mapUnsupported(error) bool { return true }
