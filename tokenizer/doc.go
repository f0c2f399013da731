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
// # Performance
//
// Encoding rates, load time and the cost of an agent turn with and without
// a Session, with the commands that measure them (tokenizer_bench_test.go)
// and what bounds each, are in docs/perf.md.
package tokenizer
