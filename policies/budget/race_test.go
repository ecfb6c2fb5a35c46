//go:build race

package budget

// raceEnabled is true when the race detector is on, which makes each call
// about 20 times slower.
const raceEnabled = true
