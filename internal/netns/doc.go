// Package netns holds toolgate's end-to-end test of transparent mode in
// Linux network namespaces; it has no code of its own outside the test.
//
// The test builds the toolgate binary and makes two namespaces joined by a
// veth pair: a "pod", where toolgate runs as uid 1337 behind the very
// iptables rules the Kubernetes init container installs
// (deploy/k8s/base/toolgate-iptables.sh), and a "world", where the demo
// tools answer over plain HTTP (port 80) and HTTPS (port 443). Unmodified
// clients in the pod (curl, Python's urllib and requests), with no proxy
// variable and trusting only the bundle `toolgate ca bundle` wrote, call
// the world by name; the test checks a typo is refused with the envelope, a
// valid call is forwarded, a host without tools is tunnelled untouched
// (and refused with the envelope under unmatched: deny), every call is
// recorded, and a routing loop is caught.
//
// The test is built on Linux only. It needs root, iproute2, iptables, curl
// and Debian's python3 with python3-requests (scripts/testdeps.sh installs
// them); it skips, saying why, without them.
package netns
