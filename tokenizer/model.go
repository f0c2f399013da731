package tokenizer

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// ErrUnsupported marks a tokenizer.json that uses a component this package
// cannot reproduce exactly. Loading refuses such a model instead of
// producing ids that differ from the engine's.
var ErrUnsupported = errors.New("unsupported tokenizer")

// Model is a loaded tokenizer together with its chat template. It is safe for
// concurrent use by many goroutines.
type Model struct {
	bpe          *bpe
	added        *addedVocab
	normalize    bool // NFC
	pre          preTokenizer
	template     *chatTemplate // nil when the config has none
	maxModelLen  int
	addedBytes   map[uint32]string // added token id -> its content
	specialNames map[string]string
	vocabSize    int
	// maxTokenBytes is the most bytes of text one token stands for: the
	// longest entry of the vocabulary or of the added tokens.
	maxTokenBytes int
	// fingerprint is the SHA-256 of the two files the model was loaded
	// from.
	fingerprint string
}

// Load reads tokenizer.json and tokenizer_config.json from dir, the two
// files a model ships on Hugging Face. tokenizer_config.json is optional.
func Load(dir string) (*Model, error) {
	tok, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	cfg, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	return LoadFiles(tok, cfg)
}

// tokenizerFile is the part of tokenizer.json this package reads.
type tokenizerFile struct {
	AddedTokens []struct {
		ID         uint32 `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		LStrip     bool   `json:"lstrip"`
		RStrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	}
	Normalizer   json.RawMessage
	PreTokenizer json.RawMessage
	Decoder      json.RawMessage
	Model        struct {
		Type                    string   `json:"type"`
		Dropout                 *float64 `json:"dropout"`
		ContinuingSubwordPrefix *string  `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string  `json:"end_of_word_suffix"`
		ByteFallback            bool     `json:"byte_fallback"`
		IgnoreMerges            bool     `json:"ignore_merges"`
	}
	Vocab, Merges json.RawMessage
}

// parseTokenizerFile splits tokenizer.json into the fields used.
func parseTokenizerFile(data []byte) (*tokenizerFile, error) {
	top, err := objectFields(data)
	if err != nil {
		return nil, err
	}
	f := &tokenizerFile{
		Normalizer:   top["normalizer"],
		PreTokenizer: top["pre_tokenizer"],
		Decoder:      top["decoder"],
	}
	if raw := top["added_tokens"]; !isNull(raw) {
		if err := json.Unmarshal(raw, &f.AddedTokens); err != nil {
			return nil, fmt.Errorf("added_tokens: %w", err)
		}
	}
	if isNull(top["model"]) {
		return nil, errors.New("no model")
	}
	model, err := objectFields(top["model"])
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	f.Vocab, f.Merges = model["vocab"], model["merges"]
	delete(model, "vocab")
	delete(model, "merges")
	small, err := json.Marshal(model)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if err := json.Unmarshal(small, &f.Model); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	return f, nil
}

// LoadFiles builds a Model from the contents of tokenizer.json and
// tokenizer_config.json (which may be empty: no chat template then).
func LoadFiles(tokenizerJSON, tokenizerConfigJSON []byte) (*Model, error) {
	f, err := parseTokenizerFile(tokenizerJSON)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: parse tokenizer.json: %w", err)
	}
	h := sha256.New()
	h.Write(tokenizerJSON)
	h.Write([]byte{0})
	h.Write(tokenizerConfigJSON)
	m := &Model{fingerprint: hex.EncodeToString(h.Sum(nil))}
	if err := m.loadModel(f); err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(tokenizerConfigJSON)) > 0 {
		if err := m.loadConfig(tokenizerConfigJSON); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Model) loadModel(f *tokenizerFile) error {
	if f.Model.Type != "BPE" {
		return fmt.Errorf("%w: model type %q (only byte-level BPE)", ErrUnsupported, f.Model.Type)
	}
	if f.Model.Dropout != nil && *f.Model.Dropout != 0 {
		return fmt.Errorf("%w: BPE dropout", ErrUnsupported)
	}
	if f.Model.ContinuingSubwordPrefix != nil && *f.Model.ContinuingSubwordPrefix != "" ||
		f.Model.EndOfWordSuffix != nil && *f.Model.EndOfWordSuffix != "" || f.Model.ByteFallback {
		return fmt.Errorf("%w: BPE with subword prefix, word suffix or byte fallback", ErrUnsupported)
	}
	var err error
	if m.normalize, err = parseNormalizer(f.Normalizer); err != nil {
		return err
	}
	if m.pre, err = parsePreTokenizer(f.PreTokenizer); err != nil {
		return err
	}
	if err := checkByteLevelComponent("decoder", f.Decoder); err != nil {
		return err
	}
	if m.bpe, err = newBPE(f.Vocab, f.Merges, f.Model.IgnoreMerges); err != nil {
		return err
	}

	maxID := m.bpe.maxID
	for _, t := range f.AddedTokens {
		maxID = max(maxID, t.ID)
	}
	m.vocabSize = int(maxID) + 1
	m.addedBytes = make(map[uint32]string, len(f.AddedTokens))
	var tokens []addedToken
	for _, t := range f.AddedTokens {
		if t.Content == "" {
			continue
		}
		if t.SingleWord || t.LStrip || t.RStrip {
			return fmt.Errorf("%w: added token %q uses single_word/lstrip/rstrip", ErrUnsupported, t.Content)
		}
		tokens = append(tokens, addedToken{content: t.Content, id: t.ID, normalized: t.Normalized && !t.Special})
		m.addedBytes[t.ID] = t.Content
	}
	m.added = newAddedVocab(tokens)
	m.maxTokenBytes = m.added.maxLen
	for id := range m.bpe.start {
		m.maxTokenBytes = max(m.maxTokenBytes, int(m.bpe.end[id]-m.bpe.start[id]))
	}
	if m.normalize && m.added.hasNormalized() {
		return fmt.Errorf("%w: added tokens matched after normalization", ErrUnsupported)
	}
	return nil
}

func parseNormalizer(raw json.RawMessage) (nfc bool, err error) {
	if isNull(raw) {
		return false, nil
	}
	var n struct {
		Type        string            `json:"type"`
		Normalizers []json.RawMessage `json:"normalizers"`
	}
	if err := json.Unmarshal(raw, &n); err != nil {
		return false, fmt.Errorf("tokenizer: parse normalizer: %w", err)
	}
	switch n.Type {
	case "NFC":
		return true, nil
	case "Sequence":
		for _, sub := range n.Normalizers {
			subNFC, err := parseNormalizer(sub)
			if err != nil {
				return false, err
			}
			if subNFC && (nfc || len(n.Normalizers) > 1) {
				// NFC composed with anything else would need the order of
				// operations kept; no supported model does that.
				return false, fmt.Errorf("%w: normalizer sequence %s", ErrUnsupported, raw)
			}
			nfc = nfc || subNFC
		}
		return nfc, nil
	}
	return false, fmt.Errorf("%w: normalizer %q", ErrUnsupported, n.Type)
}

// checkByteLevelComponent accepts a decoder that is byte-level (or absent).
func checkByteLevelComponent(what string, raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var c struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("tokenizer: parse %s: %w", what, err)
	}
	if c.Type != "ByteLevel" {
		return fmt.Errorf("%w: %s %q", ErrUnsupported, what, c.Type)
	}
	return nil
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// tokenizerConfig is the part of tokenizer_config.json this package reads.
type tokenizerConfig struct {
	ChatTemplate   json.RawMessage `json:"chat_template"`
	ModelMaxLength *float64        `json:"model_max_length"`
	BOSToken       json.RawMessage `json:"bos_token"`
	EOSToken       json.RawMessage `json:"eos_token"`
	PadToken       json.RawMessage `json:"pad_token"`
	UnkToken       json.RawMessage `json:"unk_token"`
}

func (m *Model) loadConfig(raw []byte) error {
	var c tokenizerConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("tokenizer: parse tokenizer_config.json: %w", err)
	}
	// model_max_length is a huge float sentinel when the model sets none.
	if c.ModelMaxLength != nil && *c.ModelMaxLength > 0 && *c.ModelMaxLength < 1e12 {
		m.maxModelLen = int(*c.ModelMaxLength)
	}
	m.specialNames = map[string]string{}
	for name, v := range map[string]json.RawMessage{
		"bos_token": c.BOSToken, "eos_token": c.EOSToken, "pad_token": c.PadToken, "unk_token": c.UnkToken,
	} {
		if s, ok := specialTokenString(v); ok {
			m.specialNames[name] = s
		}
	}
	source, err := chatTemplateSource(c.ChatTemplate)
	if err != nil {
		return err
	}
	if source == "" {
		return nil
	}
	m.template, err = newChatTemplate(source, m.specialNames)
	return err
}

// specialTokenString reads a special token written either as a string or as
// an AddedToken object {"content": ...}.
func specialTokenString(raw json.RawMessage) (string, bool) {
	if isNull(raw) {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var obj struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Content != "" {
		return obj.Content, true
	}
	return "", false
}

// chatTemplateSource picks the default template: chat_template is either a
// string or a list of {name, template}.
func chatTemplateSource(raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", fmt.Errorf("tokenizer: parse chat_template: %w", err)
	}
	for _, t := range named {
		if t.Name == "default" {
			return t.Template, nil
		}
	}
	return "", fmt.Errorf("%w: chat_template list has no \"default\" entry", ErrUnsupported)
}

// Fingerprint identifies the files the model was loaded from (a SHA-256
// of both): two models with the same fingerprint tokenize and render
// chats alike.
func (m *Model) Fingerprint() string { return m.fingerprint }

// MaxModelLen returns model_max_length from tokenizer_config.json, or 0 when
// the config does not say.
func (m *Model) MaxModelLen() int { return m.maxModelLen }

// nfcMaxShrink bounds how many times fewer bytes NFC can make of a text:
// three jamo (9 bytes) compose into one Hangul syllable (3); a margin on
// top. ASCII bytes are never lost: one composes at most into a letter of
// two bytes or more.
const nfcMaxShrink = 4

// MaxTokenBytes is the most bytes of text one token stands for.
func (m *Model) MaxTokenBytes() int { return m.maxTokenBytes }

// MinTokens is a lower bound on the number of tokens text encodes to,
// found without encoding it (a scan of its bytes): no token stands for
// more than MaxTokenBytes of normalized text, and text already in NFC (as
// prompts nearly always are) is its own normalized text. A server refuses
// with it a prompt that cannot fit a context before paying for its
// tokenization.
func (m *Model) MinTokens(text string) int {
	n := len(text)
	if m.normalize && !norm.NFC.IsNormalString(text) {
		n = max(asciiBytes(text), (len(text)+nfcMaxShrink-1)/nfcMaxShrink)
	}
	per := max(m.maxTokenBytes, 1)
	return (n + per - 1) / per
}

// asciiBytes counts the bytes of s below 0x80, eight at a time.
func asciiBytes(s string) int {
	const high = 0x8080808080808080
	n := 0
	for ; len(s) >= 8; s = s[8:] {
		w := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		n += 8 - bits.OnesCount64(w&high)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x80 {
			n++
		}
	}
	return n
}

// VocabSize returns one more than the largest token id.
func (m *Model) VocabSize() int { return m.vocabSize }

// Encode tokenizes text as Hugging Face tokenizers does with
// add_special_tokens=false: added and special tokens written in the text are
// matched, nothing is prepended or appended.
func (m *Model) Encode(text string) []uint32 {
	return m.encodeAppend(make([]uint32, 0, len(text)/3+4), text, 0, nil, nil)
}

// Decode turns ids back into text, special tokens included. Ids outside the
// vocabulary are skipped; bytes that do not form valid UTF-8 become U+FFFD.
func (m *Model) Decode(ids []uint32) string {
	var b []byte
	for _, id := range ids {
		if s, ok := m.addedBytes[id]; ok {
			b = append(b, s...)
		} else {
			b = append(b, m.bpe.bytes(id)...)
		}
	}
	if utf8.Valid(b) {
		return string(b)
	}
	return string(appendLossy(nil, b))
}

// appendLossy appends b with each maximal invalid UTF-8 subpart replaced by
// one U+FFFD, as Rust's String::from_utf8_lossy (and so Hugging Face's
// decoder) does.
func appendLossy(dst, b []byte) []byte {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || size > 1 {
			dst = append(dst, b[i:i+size]...)
			i += size
			continue
		}
		lead := b[i]
		need, lo, hi := 0, byte(0x80), byte(0xBF)
		switch {
		case lead >= 0xC2 && lead <= 0xDF:
			need = 1
		case lead == 0xE0:
			need, lo = 2, 0xA0
		case lead == 0xED:
			need, hi = 2, 0x9F
		case lead >= 0xE1 && lead <= 0xEF:
			need = 2
		case lead == 0xF0:
			need, lo = 3, 0x90
		case lead == 0xF4:
			need, hi = 3, 0x8F
		case lead >= 0xF1 && lead <= 0xF3:
			need = 3
		}
		j := i + 1
		for k := 0; k < need && j < len(b); k++ {
			c := b[j]
			if k == 0 && (c < lo || c > hi) || k > 0 && (c < 0x80 || c > 0xBF) {
				break
			}
			j++
		}
		dst = utf8.AppendRune(dst, utf8.RuneError)
		i = j
	}
	return dst
}
