// Package sim is a simulated vLLM engine: a paged KV cache with prefix
// caching, a continuous-batching scheduler and a timing model of a named GPU
// and model, behind vLLM's HTTP API, Prometheus metrics and ZMQ KV-event
// stream.
//
// The Core holds all engine state and advances one scheduler step at a time
// in virtual time, so the same code serves a real-time server (Runner, scaled
// by a speed-up) and the benchmark's discrete-event simulation of many
// engines in one process. The engine model must not know which routing policy
// sends it requests.
package sim
