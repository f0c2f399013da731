// Package bench generates agentic workloads, replays public traces and runs
// routing policies side by side, either live against an OpenAI-compatible
// endpoint or in a deterministic discrete-event simulation in virtual time.
//
// Nothing in the daemon imports it.
package bench
