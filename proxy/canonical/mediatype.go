package canonical

import "mime"

// ParseMediaType is mime.ParseMediaType, with the media types calls and
// answers carry most often answered as they are: each is already in the
// form ParseMediaType returns and has no parameters, and parsing costs a
// map per call on the hot path.
func ParseMediaType(v string) (mediatype string, params map[string]string, err error) {
	switch v {
	case "application/json", "text/plain", "application/x-www-form-urlencoded":
		return v, nil, nil
	}
	return mime.ParseMediaType(v)
}
