//go:build race

package queue_test

const raceEnabled = true
