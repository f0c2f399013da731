//go:build !race

package bench

// raceEnabled: the race detector slows the simulation down several times.
const raceEnabled = false
