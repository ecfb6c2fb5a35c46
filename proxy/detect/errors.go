package detect

import "errors"

// ErrConfig is wrapped by every error Validate returns: a detector name
// nobody knows, or a bound out of its range. The message names the field.
var ErrConfig = errors.New("detect: invalid config")
