// Package section holds what every section of toolgate's configuration
// file shares: the error a section's validation reports (a field path and
// a message, which the loader turns into FILE:LINE: field: message), and
// the one rule for where a relative path in the file points. It imports
// only the standard library, so every package that owns a section (proxy,
// policies, sink) can use it.
package section

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
)

// Error is a configuration error at one field, named by its path in the
// file ("tools[2].match.path", "listen.reverse[0].listen") so the loader
// can point at the line.
type Error struct {
	// Path is the field's path from the section's root, dotted, with list
	// indexes in brackets.
	Path string
	// Err says what is wrong with the field.
	Err error
}

// Error returns "path: message".
func (e *Error) Error() string { return e.Path + ": " + e.Err.Error() }

// Unwrap returns the error about the field.
func (e *Error) Unwrap() error { return e.Err }

// FieldPath returns the field's path; it is the one method the loader
// looks for on an error.
func (e *Error) FieldPath() string { return e.Path }

// Message returns what is wrong with the field, without its path.
func (e *Error) Message() string { return e.Err.Error() }

// Errorf returns an *Error at path with a formatted message.
func Errorf(path, format string, args ...any) error {
	return &Error{Path: path, Err: fmt.Errorf(format, args...)}
}

// At returns err as an *Error at path; err is kept as it is (unwrapped by
// errors.Is and errors.As).
func At(path string, err error) error { return &Error{Path: path, Err: err} }

// Under places an error of a section's validation under prefix in the
// file: a field error at "engine" under "policies" is at
// "policies.engine"; any other error is at prefix itself. A nil err
// stays nil.
func Under(prefix string, err error) error {
	if err == nil {
		return nil
	}
	var fe *Error
	if errors.As(err, &fe) {
		p := prefix
		switch {
		case fe.Path == "":
		case prefix == "":
			p = fe.Path
		case fe.Path[0] == '[':
			p = prefix + fe.Path
		default:
			p = prefix + "." + fe.Path
		}
		return &Error{Path: p, Err: fe.Err}
	}
	return &Error{Path: prefix, Err: err}
}

// Resolve returns where a path written in the configuration file points:
// p itself when it is absolute or empty, else p below dir, the folder of
// the configuration file.
func Resolve(dir, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// Dir is the folder relative paths in the configuration file at path
// resolve against: the file's own folder.
func Dir(path string) string { return filepath.Dir(path) }

// Version is the content version toolgate shows for configuration bytes
// (the configuration's version, a WASM module's): the first 12 hex digits
// of their SHA-256.
func Version(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:6])
}
