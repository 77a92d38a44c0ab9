package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hacrl/hacrl/internal/atomicfile"
)

// fileJSON is the top level of a Hugging Face tokenizer.json.
type fileJSON struct {
	Version       string          `json:"version"`
	Truncation    json.RawMessage `json:"truncation"`
	Padding       json.RawMessage `json:"padding"`
	AddedTokens   []addedToken    `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         modelJSON       `json:"model"`
}

type modelJSON struct {
	Type                    string          `json:"type"`
	Dropout                 json.RawMessage `json:"dropout"`
	UnkToken                *string         `json:"unk_token"`
	ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
	FuseUnk                 bool            `json:"fuse_unk"`
	ByteFallback            bool            `json:"byte_fallback"`
	IgnoreMerges            bool            `json:"ignore_merges"`
	Vocab                   vocabJSON       `json:"vocab"`
	Merges                  json.RawMessage `json:"merges"`
}

// vocabJSON is written in id order, as the HF library writes it.
type vocabJSON map[string]int

func (v vocabJSON) MarshalJSON() ([]byte, error) {
	toks := make([]string, 0, len(v))
	for tok := range v {
		toks = append(toks, tok)
	}
	sort.Slice(toks, func(i, j int) bool { return v[toks[i]] < v[toks[j]] })
	var b bytes.Buffer
	b.WriteByte('{')
	for i, tok := range toks {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := marshalNoEscape(tok)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		fmt.Fprintf(&b, ":%d", v[tok])
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// rawSections are the parts of a loaded file that Save writes back as they
// were read; for tokenizers built here they are generated.
type rawSections struct {
	truncation, padding, normalizer, preTokenizer, postProcessor, decoder, dropout json.RawMessage
	continuingSubwordPrefix, endOfWordSuffix                                       *string
}

// componentJSON holds the fields of the normalizer, pre-tokenizer and
// decoder kinds this package understands.
type componentJSON struct {
	Type           string            `json:"type"`
	AddPrefixSpace bool              `json:"add_prefix_space"`
	UseRegex       *bool             `json:"use_regex"`
	Pattern        *patternJSON      `json:"pattern"`
	Behavior       string            `json:"behavior"`
	Invert         bool              `json:"invert"`
	PreTokenizers  []json.RawMessage `json:"pretokenizers"`
	Normalizers    []json.RawMessage `json:"normalizers"`
	Decoders       []json.RawMessage `json:"decoders"`
}

type patternJSON struct {
	Regex  *string `json:"Regex"`
	String *string `json:"String"`
}

// Load reads a tokenizer.json: the char-level and byte-level BPE files this
// package writes, and Hugging Face byte-level BPE files (GPT-2, Llama 3,
// Qwen2). It returns a *Char for a BPE model with no merges and no
// pre-tokenizer, and a *BPE otherwise. Errors name the file and the field.
//
// Special roles come from the token names (BOSNames, EOSNames, …) unless a
// tokenizer_config.json beside the file names them in bos_token, eos_token,
// pad_token or unk_token, as Hugging Face model repositories do.
func Load(path string) (Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	cfg := filepath.Join(filepath.Dir(path), "tokenizer_config.json")
	if data, err := os.ReadFile(cfg); err == nil {
		if t.specials, err = t.configSpecials(data); err != nil {
			return nil, fmt.Errorf("tokenizer: %s: %w", cfg, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if len(t.mergeList) == 0 && len(t.pipeline.splits) == 0 && !t.pipeline.byteLevel {
		return &Char{BPE: t}, nil
	}
	return t, nil
}

// parse builds a tokenizer from the bytes of a tokenizer.json.
func parse(data []byte) (*BPE, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, jsonError(err)
	}
	m := &f.Model
	if m.Type != "BPE" {
		return nil, fmt.Errorf("model.type: %q is not supported (want \"BPE\")", m.Type)
	}
	if m.Vocab == nil {
		return nil, errors.New("model.vocab: missing")
	}
	if m.ByteFallback {
		return nil, errors.New("model.byte_fallback: true is not supported")
	}
	if s := m.ContinuingSubwordPrefix; s != nil && *s != "" {
		return nil, fmt.Errorf("model.continuing_subword_prefix: %q is not supported (want null or \"\")", *s)
	}
	if s := m.EndOfWordSuffix; s != nil && *s != "" {
		return nil, fmt.Errorf("model.end_of_word_suffix: %q is not supported (want null or \"\")", *s)
	}
	if d := strings.TrimSpace(string(m.Dropout)); d != "" && d != "null" && d != "0" && d != "0.0" {
		return nil, fmt.Errorf("model.dropout: %s is not supported (want null)", d)
	}
	tokens, err := vocabTokens(m.Vocab)
	if err != nil {
		return nil, err
	}
	merges, err := parseMerges(m.Merges, m.Vocab)
	if err != nil {
		return nil, err
	}
	unk := int32(-1)
	if m.UnkToken != nil {
		id, ok := m.Vocab[*m.UnkToken]
		if !ok {
			return nil, fmt.Errorf("model.unk_token: %q is not in model.vocab", *m.UnkToken)
		}
		unk = int32(id)
	}
	seen := make(map[string]bool, len(f.AddedTokens))
	ids := make(map[int]int, len(f.AddedTokens)) // added token id → its index
	// The ids of model.vocab and added_tokens leave no more holes than
	// there are added tokens (real files have none): an id past that is
	// damage, which would make the tokenizer allocate a table that large.
	limit := len(tokens) + len(f.AddedTokens)
	for i, a := range f.AddedTokens {
		j, dup := ids[a.ID]
		switch {
		case a.Content == "":
			return nil, fmt.Errorf("added_tokens[%d].content: empty", i)
		case a.ID < 0:
			return nil, fmt.Errorf("added_tokens[%d].id: %d is negative", i, a.ID)
		case a.ID >= limit:
			return nil, fmt.Errorf("added_tokens[%d].id: %d is past the %d tokens of model.vocab and added_tokens", i, a.ID, limit)
		case seen[a.Content]:
			return nil, fmt.Errorf("added_tokens[%d].content: %q appears twice", i, a.Content)
		case dup:
			return nil, fmt.Errorf("added_tokens[%d].id: %d is added_tokens[%d]'s too", i, a.ID, j)
		}
		ids[a.ID] = i
		if id, ok := m.Vocab[a.Content]; ok && id != a.ID {
			return nil, fmt.Errorf("added_tokens[%d].id: %d, but model.vocab has %q as %d", i, a.ID, a.Content, id)
		}
		if a.ID < len(tokens) && tokens[a.ID] != "" && tokens[a.ID] != a.Content {
			return nil, fmt.Errorf("added_tokens[%d].id: %d is %q in model.vocab", i, a.ID, tokens[a.ID])
		}
		seen[a.Content] = true
	}
	p, err := parsePipeline(&f)
	if err != nil {
		return nil, err
	}
	raw := rawSections{
		truncation: f.Truncation, padding: f.Padding, normalizer: f.Normalizer,
		preTokenizer: f.PreTokenizer, postProcessor: f.PostProcessor, decoder: f.Decoder,
		dropout: m.Dropout, continuingSubwordPrefix: m.ContinuingSubwordPrefix, endOfWordSuffix: m.EndOfWordSuffix,
	}
	opts := modelOptions{fuseUnk: m.FuseUnk, ignoreMerges: m.IgnoreMerges}
	return newBPE(tokens, merges, f.AddedTokens, unk, opts, p, raw), nil
}

// jsonError names the field of a JSON type error.
func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Errorf("%s: got JSON %s, want %s", te.Field, te.Value, te.Type)
	}
	return fmt.Errorf("invalid JSON: %w", err)
}

// vocabTokens inverts the vocabulary into an id-indexed slice.
func vocabTokens(vocab vocabJSON) ([]string, error) {
	size := 0
	for tok, id := range vocab {
		if id < 0 {
			return nil, fmt.Errorf("model.vocab[%q]: negative id %d", tok, id)
		}
		if tok == "" {
			return nil, fmt.Errorf("model.vocab: empty token with id %d", id)
		}
		size = max(size, id+1)
	}
	if size > 4*len(vocab)+1024 {
		return nil, fmt.Errorf("model.vocab: ids reach %d for %d tokens", size-1, len(vocab))
	}
	tokens := make([]string, size)
	for tok, id := range vocab {
		if tokens[id] != "" {
			a, b := min(tok, tokens[id]), max(tok, tokens[id])
			return nil, fmt.Errorf("model.vocab: %q and %q share id %d", a, b, id)
		}
		tokens[id] = tok
	}
	return tokens, nil
}

// parseMerges reads model.merges in either form the HF library writes:
// "a b" strings or ["a", "b"] pairs.
func parseMerges(raw json.RawMessage, vocab vocabJSON) ([][2]int32, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("model.merges: want a list: %w", err)
	}
	merges := make([][2]int32, 0, len(items))
	for i, item := range items {
		var pair []string
		var s string
		if err := json.Unmarshal(item, &s); err == nil {
			pair = strings.Split(s, " ")
		} else if err := json.Unmarshal(item, &pair); err != nil {
			return nil, fmt.Errorf("model.merges[%d]: want \"a b\" or [\"a\", \"b\"], got %s", i, item)
		}
		if len(pair) != 2 {
			return nil, fmt.Errorf("model.merges[%d]: want two tokens, got %d", i, len(pair))
		}
		var m [2]int32
		for k, tok := range pair {
			id, ok := vocab[tok]
			if !ok {
				return nil, fmt.Errorf("model.merges[%d]: %q is not in model.vocab", i, tok)
			}
			m[k] = int32(id)
		}
		if _, ok := vocab[pair[0]+pair[1]]; !ok {
			return nil, fmt.Errorf("model.merges[%d]: merged token %q is not in model.vocab", i, pair[0]+pair[1])
		}
		merges = append(merges, m)
	}
	return merges, nil
}

func isNull(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s == "" || s == "null"
}

// parsePipeline reads the normalizer, pre-tokenizer and decoder.
func parsePipeline(f *fileJSON) (pipeline, error) {
	var p pipeline
	if !isNull(f.Normalizer) {
		var c componentJSON
		if err := json.Unmarshal(f.Normalizer, &c); err != nil {
			return p, fmt.Errorf("normalizer: %w", err)
		}
		switch {
		case c.Type == "NFC":
			p.nfc = true
		case c.Type == "Sequence" && len(c.Normalizers) == 0:
		default:
			return p, fmt.Errorf("normalizer.type: %q is not supported (want null or \"NFC\")", c.Type)
		}
	}
	if !isNull(f.PreTokenizer) {
		if err := p.addPreTokenizer("pre_tokenizer", f.PreTokenizer); err != nil {
			return p, err
		}
	}
	if !isNull(f.Decoder) {
		var c componentJSON
		if err := json.Unmarshal(f.Decoder, &c); err != nil {
			return p, fmt.Errorf("decoder: %w", err)
		}
		switch c.Type {
		case "ByteLevel":
			p.decoder = decodeByteLevel
		case "Fuse":
			p.decoder = decodeFuse
		default:
			return p, fmt.Errorf("decoder.type: %q is not supported (want \"ByteLevel\" or \"Fuse\")", c.Type)
		}
	}
	return p, nil
}

// addPreTokenizer appends the steps of one pre-tokenizer; field names it in errors.
func (p *pipeline) addPreTokenizer(field string, raw json.RawMessage) error {
	var c componentJSON
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	if p.byteLevel {
		return fmt.Errorf("%s: a %q step after ByteLevel is not supported", field, c.Type)
	}
	switch c.Type {
	case "Sequence":
		for i, sub := range c.PreTokenizers {
			if err := p.addPreTokenizer(fmt.Sprintf("%s.pretokenizers[%d]", field, i), sub); err != nil {
				return err
			}
		}
	case "ByteLevel":
		p.byteLevel = true
		p.byteLevelRegex = c.UseRegex == nil || *c.UseRegex
		p.addPrefixSpace = c.AddPrefixSpace
	case "Split":
		if c.Pattern == nil || c.Pattern.Regex == nil {
			return fmt.Errorf("%s.pattern: want {\"Regex\": ...}", field)
		}
		sp, ok := splitterFor(*c.Pattern.Regex)
		if !ok {
			return fmt.Errorf("%s.pattern.Regex: %q is not supported (supported: the GPT-2, Llama 3 and Qwen2 patterns)", field, *c.Pattern.Regex)
		}
		if c.Behavior != "Isolated" || c.Invert {
			return fmt.Errorf("%s.behavior: %q with invert %v is not supported (want \"Isolated\", false)", field, c.Behavior, c.Invert)
		}
		p.splits = append(p.splits, sp)
	default:
		return fmt.Errorf("%s.type: %q is not supported (want ByteLevel, Split or Sequence)", field, c.Type)
	}
	return nil
}

// Save writes the tokenizer as a Hugging Face tokenizer.json, atomically.
func (t *BPE) Save(path string) error {
	data, err := t.marshal()
	if err != nil {
		return fmt.Errorf("tokenizer: save %s: %w", path, err)
	}
	if err := atomicfile.WriteFile(path, data); err != nil {
		return fmt.Errorf("tokenizer: save: %w", err)
	}
	return nil
}

// marshal renders the tokenizer.json bytes.
func (t *BPE) marshal() ([]byte, error) {
	vocab := make(vocabJSON, len(t.vocab))
	for tok, id := range t.vocab {
		vocab[tok] = int(id)
	}
	merges := make([][2]string, len(t.mergeList))
	for i, m := range t.mergeList {
		merges[i] = [2]string{t.tokens[m[0]], t.tokens[m[1]]}
	}
	var unk *string
	if t.unk >= 0 {
		unk = &t.tokens[t.unk]
	}
	mergesJSON, err := marshalNoEscape(merges)
	if err != nil {
		return nil, err
	}
	added := t.added
	if added == nil {
		added = []addedToken{}
	}
	orNull := func(raw json.RawMessage) json.RawMessage {
		if len(raw) == 0 {
			return json.RawMessage("null")
		}
		return raw
	}
	out := fileJSON{
		Version: "1.0", Truncation: orNull(t.raw.truncation), Padding: orNull(t.raw.padding),
		AddedTokens: added, Normalizer: orNull(t.raw.normalizer), PreTokenizer: orNull(t.raw.preTokenizer),
		PostProcessor: orNull(t.raw.postProcessor), Decoder: orNull(t.raw.decoder),
		Model: modelJSON{
			Type: "BPE", Dropout: orNull(t.raw.dropout), UnkToken: unk,
			ContinuingSubwordPrefix: t.raw.continuingSubwordPrefix, EndOfWordSuffix: t.raw.endOfWordSuffix,
			FuseUnk: t.opts.fuseUnk, IgnoreMerges: t.opts.ignoreMerges, Vocab: vocab, Merges: mergesJSON,
		},
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// marshalNoEscape is json.Marshal without HTML escaping, so "<|endoftext|>"
// stays readable.
func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// configSpecials applies the roles named in a tokenizer_config.json; each is
// a token string, an object with "content", or null (no such role).
func (t *BPE) configSpecials(data []byte) (Specials, error) {
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(data, &cfg); err != nil {
		return Specials{}, jsonError(err)
	}
	s := t.specials
	for _, role := range []struct {
		field string
		id    *int
	}{{"bos_token", &s.BOS}, {"eos_token", &s.EOS}, {"pad_token", &s.PAD}, {"unk_token", &s.UNK}} {
		raw, ok := cfg[role.field]
		if !ok {
			continue
		}
		if isNull(raw) {
			*role.id = -1
			continue
		}
		var name string
		if err := json.Unmarshal(raw, &name); err != nil {
			var obj struct{ Content *string }
			if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
				return Specials{}, fmt.Errorf("%s: want a token string, {\"content\": ...} or null, got %s", role.field, raw)
			}
			name = *obj.Content
		}
		id, ok := t.TokenID(name)
		if !ok {
			return Specials{}, fmt.Errorf("%s: %q is not a token", role.field, name)
		}
		*role.id = id
	}
	return s, nil
}
