// Package adversarial holds toolgate's adversarial differential suite: a
// real toolgate (proxy.Server on real listeners, configured through YAML)
// in front of stock upstreams that parse requests their own way (Go's
// net/http ServeMux with FormValue and encoding/json, a Flask app run by
// Debian's python3, and nginx as a path-cleaning front), attacked by raw TCP
// clients and ordinary legacy clients.
//
// The measure is a differential: every request an upstream's tool handler
// serves is recorded with the arguments its framework parsed, and the suite
// checks that toolgate inspected that request as that tool and that its
// checks would have accepted every one of those arguments. Anything else is
// a leak, and the suite fails on any leak. docs/security.md lists the
// guarantees and which test shows each.
//
// The package has no code of its own; it is only its tests:
//
//	go test -race -run 'TestAdversarial' ./proxy/adversarial/
//	TOOLGATE_ADVERSARIAL_REPORT=1 go test -run 'TestAdversarial' -v ./proxy/adversarial/  # list, never fail
//	go test -run '^$' -fuzz FuzzMediation ./proxy/adversarial/
package adversarial
