// Package tokenizer turns chat requests into the exact token ids an engine
// computes (chat template, byte-level BPE) and hashes them into 16-token KV
// blocks the way the router indexes them.
//
// It is shared by the router and the simulated engine, so that the hashes the
// router computes for a request and the ones it rebuilds from the engine's
// events agree. It depends only on the standard library, gonja, regexp2,
// xxh3 and golang.org/x/text (for NFC), and must not import any other Hearth
// package. It does no I/O beyond reading a model directory in Load.
//
// # What it reproduces
//
// Load and LoadFiles read the tokenizer.json and tokenizer_config.json a
// model ships on Hugging Face. Encode tokenizes as Hugging Face tokenizers
// does with add_special_tokens=false for byte-level BPE models (Qwen2/2.5/3,
// Llama 3.x, DeepSeek V3, gpt-oss): added and special tokens are matched
// leftmost-longest on the raw text first, the text between them is NFC
// normalized (when the model says so), split by the pre-tokenizer regex
// (Split stages with Isolated behaviour, then ByteLevel), and each word is
// merged by rank; both merge formats ("a b" and ["a", "b"]) are read. A
// model using anything else (Unigram or WordPiece, another normalizer,
// Metaspace, a Split behaviour other than Isolated, added tokens with
// lstrip/rstrip/single_word, ...) is refused with ErrUnsupported rather than
// tokenized approximately.
//
// The Qwen2/Qwen3 and Llama 3 regexes run on a hand-written scanner; any
// other regex runs on regexp2, which backtracks with lookahead as Hugging
// Face's Oniguruma does. FuzzScannerMatchesRegexp holds the scanner equal to
// regexp2. Whitespace is Unicode White_Space (U+0085 is, U+FEFF is not).
//
// ApplyChatTemplate renders the model's Jinja chat template with gonja in
// the environment transformers gives it (trim_blocks, lstrip_blocks, tojson
// with ", "/": " separators, key order kept and non-ASCII unescaped,
// raise_exception, strftime_now). Messages and tools stay ordered: they are
// parsed into gonja's ordered dicts, never Go maps. Qwen3's template is also
// written out in Go (renderQwen3), picked by the template's SHA-256 and held
// equal to gonja by tests; it is about six times faster and falls back to
// gonja for any conversation shape it does not cover (a content that is not
// a string, for one).
//
// A Session tokenizes the successive prompts of one conversation. While
// encoding it records restart points: word or added-token boundaries,
// followed by ASCII (so NFC cannot reach across them), each with the last
// byte that decided everything before it (the scanner reports how far it
// looked ahead: a whitespace run or an added token that might continue).
// The next turn restarts at the last point whose deciding bytes all lie in
// the text it shares with the previous turn, so it tokenizes only the
// changed tail, and extends the block hashes from there. The result is
// always exactly Encode's; tests check this on the reference agent
// conversations and on random edits.
//
// A Model is safe for concurrent use; its word cache is sharded. A Session
// is not.
//
// # Measured performance
//
// Measured on the 2-core development machine while other builds and tests
// shared it (load average 7 to 10), so wall times swing two to three fold
// between runs; cpu-ns/op, the process's CPU time per operation with GC
// included, is the steadier figure. Ranges are over three runs of:
//
//	go test -run x -bench . -benchtime 20x -cpu 1 ./tokenizer/
//	go test -run x -bench AgentTurn -benchtime 300x -cpu 1 ./tokenizer/
//
//	Encode, English prose (warm word cache)   17.5-17.7 M tokens per CPU second (5.8-13 M/s wall)
//	Encode, Go source code                    17.3-19.6 M tokens per CPU second (7-11 M/s wall)
//	Encode, 8.8k-token agent prompt           14.4-19.2 M tokens per CPU second
//	Encode, empty word cache every time        5.7-7.6 M tokens per CPU second
//	LoadFiles, Qwen3 (11 MB tokenizer.json)   147-184 ms CPU (190-311 ms wall)
//	Agent turn, 30.9k-token history + 1k new tokens:
//	  render + tokenize + hash with a Session  0.39-0.66 ms CPU (0.47-1.2 ms wall)
//	  of which tokenize + hash                 0.09-0.13 ms CPU (30,867 tokens reused)
//	  of which render (Go Qwen3 template)      0.29-0.39 ms CPU
//	  render through gonja instead             1.6-2.5 ms CPU
//	  render + tokenize + hash, no Session     2.0-3.4 ms CPU
//
// Again with nothing else running (load average about 1.5), wall time:
// Encode 20.7 M tokens/s on English prose and 24.7 M on Go code, LoadFiles
// 184 ms, an agent turn with a Session 0.34-0.41 ms (-benchtime 300x,
// three runs).
//
// What bounds them: plain encoding is bound by the word-cache lookup (a
// hash and a map probe per word, behind a read lock) and the scanner's
// per-rune classification; a cold cache adds the merge loop. Loading is
// bound by building the merge and vocabulary maps (151k entries each) and
// scanning 11 MB of JSON. A session turn is bound by rendering: parsing the
// conversation's JSON (every turn re-reads the whole history) and writing
// the prompt; the tokenizer's share is the appended text plus a comparison
// of the two prompts.
package tokenizer
