// Command testsummary reads the event stream of go test -json on its
// standard input and writes what a plain go test shows (a line per
// package, the output of every test that failed, a package's own output
// when it failed, such as a timeout's panic), then the slowest packages and
// tests and the failures in a few lines. scripts/test runs the suite
// through it, so that a suite near its time limit says which tests make it
// slow before it fails, and one that hit the limit names what was running.
//
// A test that was still running when its package failed (the timeout's
// panic names it too) is reported with its output and as unfinished. The
// exit status is 1 when a package or a test failed, a build failed, or the
// stream ended before a package did; 2 when the input is not go test's
// JSON.
//
// Usage: go test -json ./... | go run ./scripts/testsummary [-top N]
package main
