//go:build race

package queue_test

// raceEnabled reports a build with the race detector (see seeds).
const raceEnabled = true
