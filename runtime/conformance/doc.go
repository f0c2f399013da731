// Package conformance is the engine-conformance suite: what Hearth needs of
// a serving engine, asked of a running one over its own HTTP API and ZMQ
// publisher, as Hearth asks it.
//
// The suite (its tests; the package has no code of its own) checks that the
// engine answers its liveness path and lists its model on /v1/models; that
// its /tokenize gives the same ids as Hearth's tokenizer for the start-up
// self-check's sample conversations (runtime.CheckTokenizer); that one chat
// request's KV events arrive on its publisher and their BlockStored token
// ids are the prompt's full blocks, so that the router's hashes of them
// (tokenizer.BlockHashes) are the hashes of Hearth's tokenization; that
// the start-up KV-event self-check (runtime.CheckKVEvents: a probe in two
// requests, its blocks chained by the engine's parent hashes) matches every
// probe block; and that its /metrics parse by its kind's metric names (runtime.ScrapeStats).
//
// It runs against both simulated kinds (vLLM and SGLang, in-process, real
// HTTP and ZMQ) in every test run, and against a real engine when
// HEARTH_CONFORMANCE_URL names one (docs/engine-conformance.md, "Running
// the conformance suite against a real engine"); without it that test is
// skipped and says why.
package conformance
