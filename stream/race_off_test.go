//go:build !race

package stream

// raceEnabled: built with -race, whose instrumentation allocates.
const raceEnabled = false
