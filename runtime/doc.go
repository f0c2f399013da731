// Package runtime starts, stops and lists inference engine instances (vLLM or
// SGLang containers, or the built-in simulated engine) from an engine Spec.
//
// The name shadows the standard library's; import it as hruntime where both
// are needed. It must not make routing decisions.
package runtime
