//go:build !race

package kvevents

// raceEnabled: the race detector changes what allocates.
const raceEnabled = false
