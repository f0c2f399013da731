// Package nodes discovers GPUs: local ones through NVML (behind the cgo build
// tag), LAN peers through mDNS, or a simulated list such as "2x4090".
//
// A GPU is a plain struct so that everything downstream can be tested without
// hardware. The package must not start engines; that is runtime's job.
package nodes
