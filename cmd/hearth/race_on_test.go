//go:build race

package main

// raceDetector: this test binary is built with -race.
const raceDetector = true
