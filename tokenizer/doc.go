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
// merged by rank; both merge formats ("a b" and ["a", "b"]) are read. The
// pre-tokenizer layouts of those families are all read: a Split regex then
// ByteLevel without its own regex (Qwen, Llama 3, gpt-oss's o200k, Mistral
// Tekken), several Splits in sequence (DeepSeek V3), Digits stages, and
// ByteLevel with its GPT-2 regex; tests hold the ids of the real Qwen3,
// Llama 3 and o200k vocabularies to published reference ids
// (testdata/real). A model using anything else (Unigram or WordPiece,
// another normalizer, Metaspace, a Split behaviour other than Isolated,
// added tokens with lstrip/rstrip/single_word, ...) is refused with
// ErrUnsupported rather than tokenized approximately.
//
// SentencePiece models (Llama 2, Mistral v0.1-v0.3 before Tekken, Gemma)
// are such models: their tokenizer.json is BPE over "▁"-prefixed pieces
// with byte fallback, or Unigram with Metaspace. Loading one is
// ErrUnsupported, and hearth up refuses to serve it (catalog.LoadTokenizer
// says why) instead of routing it with hashes its engines' KV events never
// match. The router's approximate mode (workers without KV events) would
// still need the gateway's own token ids to hash, so it is no way around
// a tokenizer this package cannot reproduce.
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
// a Session, with the commands that measure them (tokenizer_bench_test.go),
// are in docs/perf.md; what bounds each is in docs/perf-history.md.
package tokenizer
