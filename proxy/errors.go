package proxy

import "errors"

// Sentinels for bounded inputs. Each maps to one answer in exactly one place
// (handle): errBodyTooLarge to validation/body_too_large, errClientBody to a
// caller that went away, which is not a failure of the tool.
var (
	errBodyTooLarge = errors.New("request body exceeds the limit")
	errClientBody   = errors.New("reading the caller's body failed")
)
