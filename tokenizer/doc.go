// Package tokenizer turns chat requests into the exact token ids an engine
// computes (chat template, byte-level BPE) and hashes them into 16-token KV
// blocks the way the router indexes them.
//
// It is shared by the router and the simulated engine, so that the hashes the
// router computes for a request and the ones it rebuilds from the engine's
// events agree. It depends only on the standard library, gonja, regexp2 and
// xxh3, and must not import any other Hearth package.
package tokenizer
