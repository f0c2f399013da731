// Package adminapi is the daemon's admin HTTP API (/api/v1/…) and its one
// client: the engines and their logs, the agent sessions, the models
// served on demand, the cluster's nodes and join requests, and this node's
// drain (GET /api/v1/node, POST /api/v1/node/drain and /undrain).
//
// Contract: Mount adds every /api/v1 route, each behind the guard it is
// given (the console's admin-key check), and reads the daemon only through
// the small interfaces in Sources; it starts nothing, owns no state and
// keeps nothing after a request but a followed log stream, which ends with
// its client or the server. The JSON shapes (types.go) are the API's own,
// copied from the daemon's values by its adapters, so that a field added
// to an internal struct reaches the API only on purpose. Error answers are
// fiber errors, written in the gateway's error format by the app's error
// handler; a missing engine's logs answer {"error": "..."} themselves.
//
// Client speaks to a running daemon for the command line: one method per
// endpoint, every status but 200 an *Error carrying the status and the
// server's message. HTTPClientTrusting makes the *http.Client that also
// trusts Hearth's own CA (tls/ca.pem under the data directory, written by
// hearth up --tls auto).
//
// The local token (localtoken.go) is the proof a state-changing request
// from the command line on the daemon's machine carries when it has no
// admin key: the daemon writes it (WriteLocalToken) to a 0600 file in its
// data directory at each start, the console's guard accepts it from
// loopback, and the client sends it (SetLocalToken) only to a loopback
// address.
//
// MountProfiler (pprof.go) serves Go's runtime profiles under /debug/pprof/
// for a daemon started with --pprof, behind a guard that, unlike /api/v1's
// reads, passes only a checked admin key or local token.
//
// This package imports no other Hearth package; only cmd and daemon
// import it.
package adminapi
