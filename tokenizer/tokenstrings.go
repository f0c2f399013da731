package tokenizer

// TokenStrings names each id as the vocabulary writes it, as transformers'
// convert_ids_to_tokens does (vLLM's /tokenize token_strs): an added token
// by its content, any other in the byte-level alphabet ("Ġworld" for
// " world"). An id outside the vocabulary is "".
func (m *Model) TokenStrings(ids []uint32) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		if s, ok := m.addedBytes[id]; ok {
			out[i] = string(s)
			continue
		}
		raw := m.bpe.bytes(id)
		rs := make([]rune, len(raw))
		for j, b := range raw {
			rs[j] = byteToRune[b]
		}
		out[i] = string(rs)
	}
	return out
}
