// Package nodes discovers GPUs: local ones through NVML (behind the cgo build
// tag), LAN peers through mDNS, or a simulated list such as "2x4090".
//
// A GPU is a plain struct so that everything downstream can be tested without
// hardware. Its kind, and the memory of a simulated one, come from the
// catalog package, which also maps the marketing names NVML reports to kinds. The package must not start engines; that is runtime's job.
package nodes
