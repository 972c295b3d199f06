//go:build !race

package crd

// raceEnabled is true when the tests run with the race detector, which makes CEL evaluation an
// order of magnitude slower.
const raceEnabled = false
