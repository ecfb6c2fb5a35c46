//go:build race

package policies

// raceEnabled is true when the race detector is on, which makes compiling
// a schema about ten times slower.
const raceEnabled = true
