package conf

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
)

var pathUnescape = url.PathUnescape

// ReadBody reads the whole body if it is at most limit bytes, reading one
// byte more than the limit to detect a larger one. A declared Content-Length
// over the limit is refused before anything is read.
func ReadBody(r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if r.ContentLength > limit {
		return nil, ErrBodyTooLarge
	}
	buf, err := ReadUpTo(r.Body, r.ContentLength, limit)
	if err != nil {
		if IsTimeout(err) {
			return nil, ErrBodyTimeout
		}
		return nil, fmt.Errorf("%w: %v", errClientBody, err)
	}
	if int64(len(buf)) > limit {
		return nil, ErrBodyTooLarge
	}
	return buf, nil
}

// ReadUpTo reads r to its end, or to limit+1 bytes, whichever comes
// first, and returns what it read, also along with an error. size is the
// length r declares (-1 when unknown): a body of a declared length up to
// 64 KiB is read into one buffer of that size plus the byte that shows its
// end, where bytes.Buffer and io.ReadAll would grow a 512-byte one (a
// third of a checked call's allocated bytes went to such growth).
func ReadUpTo(r io.Reader, size, limit int64) ([]byte, error) {
	if size < 0 || size > 64<<10 {
		size = 512
	}
	b := make([]byte, 0, min(size, limit)+1)
	for int64(len(b)) <= limit {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):min(int64(cap(b)), limit+1)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
	return b, nil
}

// MaxDuplicateViolations bounds the violations of one duplicate_argument
// refusal.
const MaxDuplicateViolations = 16

// EscapePointer escapes one JSON pointer token.
func EscapePointer(s string) string {
	var b []byte
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '~':
			b = append(b, '~', '0')
		case '/':
			b = append(b, '~', '1')
		default:
			b = append(b, s[i])
		}
	}
	return string(b)
}
