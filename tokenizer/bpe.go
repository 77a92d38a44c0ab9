package tokenizer

import (
	"sort"
	"strings"
	"sync"

	"golang.org/x/text/unicode/norm"
)

// BPE is a byte-pair-encoding tokenizer in the Hugging Face model: added
// tokens are split out first, the rest is normalized, cut into words by the
// pre-tokenizer, and each word is merged pair by pair in merge-rank order.
// A byte-level BPE (TrainBPE, GPT-2, Llama 3, Qwen2) maps every byte to a
// printable rune before merging, so it never needs an unknown token.
type BPE struct {
	tokens  []string         // id → token; "" for ids without one
	vocab   map[string]int32 // the model's vocabulary
	added   []addedToken     // sorted by id
	special []bool           // id → special added token
	byFirst [256][]int       // first byte → indexes into added, longest first

	merges    map[[2]int32]merge
	mergeList [][2]int32 // in rank order
	unk       int32      // −1 when the model has no unk_token

	opts     modelOptions
	pipeline pipeline
	specials Specials
	raw      rawSections // sections written back unchanged by Save

	mu    sync.Mutex
	cache map[string][]int32
}

type merge struct{ rank, id int32 }

type addedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// modelOptions are the BPE model flags that change encoding.
type modelOptions struct {
	fuseUnk      bool
	ignoreMerges bool
}

// pipeline is the normalizer, pre-tokenizer and decoder, as far as encoding
// and decoding need them.
type pipeline struct {
	nfc            bool
	splits         []splitter // Split steps, in order, before the ByteLevel step
	byteLevel      bool       // ByteLevel pre-tokenizer step, last
	byteLevelRegex bool       // the ByteLevel step also splits with GPT2Pattern
	addPrefixSpace bool
	decoder        decoderKind
}

type decoderKind int

const (
	decodeJoinSpace decoderKind = iota // no decoder: tokens joined by " ", as HF does
	decodeFuse                         // tokens concatenated
	decodeByteLevel                    // byte-level runes back to bytes
)

const (
	maxCacheEntries = 1 << 16
	maxCachedWord   = 256 // bytes
)

// newBPE builds the tokenizer's indexes. tokens[i] is the model token of id
// i ("" for none); added tokens may reuse model ids or have their own.
func newBPE(tokens []string, merges [][2]int32, added []addedToken, unk int32, opts modelOptions, p pipeline, raw rawSections) *BPE {
	t := &BPE{
		vocab:     make(map[string]int32, len(tokens)),
		mergeList: merges,
		merges:    make(map[[2]int32]merge, len(merges)),
		unk:       unk,
		opts:      opts,
		pipeline:  p,
		raw:       raw,
		cache:     make(map[string][]int32),
	}
	size := len(tokens)
	for _, a := range added {
		size = max(size, a.ID+1)
	}
	t.tokens = make([]string, size)
	copy(t.tokens, tokens)
	for id, tok := range tokens {
		if tok != "" {
			t.vocab[tok] = int32(id)
		}
	}
	for rank, m := range merges {
		id := t.vocab[tokens[m[0]]+tokens[m[1]]]
		if _, dup := t.merges[m]; !dup {
			t.merges[m] = merge{rank: int32(rank), id: id}
		}
	}
	t.added = append([]addedToken(nil), added...)
	sort.SliceStable(t.added, func(i, j int) bool { return t.added[i].ID < t.added[j].ID })
	t.special = make([]bool, size)
	for i, a := range t.added {
		t.tokens[a.ID] = a.Content
		t.special[a.ID] = a.Special
		if a.Content != "" {
			t.byFirst[a.Content[0]] = append(t.byFirst[a.Content[0]], i)
		}
	}
	for b := range t.byFirst {
		idx := t.byFirst[b]
		sort.SliceStable(idx, func(i, j int) bool { return len(t.added[idx[i]].Content) > len(t.added[idx[j]].Content) })
	}
	t.specials = t.findSpecials()
	return t
}

// findSpecials assigns the special roles by token name.
func (t *BPE) findSpecials() Specials {
	find := func(names []string) int {
		for _, name := range names {
			for _, a := range t.added {
				if a.Special && a.Content == name {
					return a.ID
				}
			}
		}
		return -1
	}
	s := Specials{BOS: find(BOSNames), EOS: find(EOSNames), PAD: find(PADNames), UNK: int(t.unk)}
	if s.UNK < 0 {
		s.UNK = find(UNKNames)
	}
	return s
}

// VocabSize is one more than the largest id.
func (t *BPE) VocabSize() int { return len(t.tokens) }

// Special returns the ids of BOS, EOS, PAD and UNK, −1 where absent.
func (t *BPE) Special() Specials { return t.specials }

// TokenID returns the id of an added token or a vocabulary token as written
// in tokenizer.json (byte-level tokens use the GPT-2 runes, e.g. "Ġthe").
func (t *BPE) TokenID(token string) (int, bool) {
	for _, a := range t.added {
		if a.Content == token {
			return a.ID, true
		}
	}
	id, ok := t.vocab[token]
	return int(id), ok
}

// Token returns the token of id as written in tokenizer.json.
func (t *BPE) Token(id int) (string, bool) {
	if id < 0 || id >= len(t.tokens) || t.tokens[id] == "" {
		return "", false
	}
	return t.tokens[id], true
}

// Encode returns the ids of text without adding special tokens.
func (t *BPE) Encode(text string) []int {
	ids := make([]int, 0, len(text)/3+1)
	for len(text) > 0 {
		at, a := t.nextAdded(text)
		ids = t.encodeSegment(ids, text[:at])
		if a == nil {
			break
		}
		ids = append(ids, a.ID)
		text = text[at+len(a.Content):]
	}
	return ids
}

// nextAdded finds the leftmost added token in text, longest on ties, and
// returns its offset; without one it returns len(text) and nil.
func (t *BPE) nextAdded(text string) (int, *addedToken) {
	for i := 0; i < len(text); i++ {
		for _, k := range t.byFirst[text[i]] {
			if strings.HasPrefix(text[i:], t.added[k].Content) {
				return i, &t.added[k]
			}
		}
	}
	return len(text), nil
}

// encodeSegment encodes text that holds no added token.
func (t *BPE) encodeSegment(ids []int, text string) []int {
	if text == "" {
		return ids
	}
	p := &t.pipeline
	if p.nfc {
		text = norm.NFC.String(text)
	}
	words := []string{text}
	for _, sp := range p.splits {
		var next []string
		for _, w := range words {
			next = sp.split(next, w)
		}
		words = next
	}
	if p.byteLevel {
		var next []string
		for _, w := range words {
			if p.addPrefixSpace && !strings.HasPrefix(w, " ") {
				w = " " + w
			}
			if p.byteLevelRegex {
				next = splitter{}.split(next, w)
			} else {
				next = append(next, w)
			}
		}
		words = next
	}
	for _, w := range words {
		ids = t.encodeWord(ids, w)
	}
	return ids
}

// encodeWord appends the ids of one pre-token, before its byte-level
// mapping, using the cache.
func (t *BPE) encodeWord(ids []int, word string) []int {
	if len(t.merges) == 0 && !t.opts.ignoreMerges {
		return appendIDs(ids, t.symbols(t.modelWord(word)))
	}
	cacheable := len(word) <= maxCachedWord
	if cacheable {
		t.mu.Lock()
		syms, ok := t.cache[word]
		t.mu.Unlock()
		if ok {
			return appendIDs(ids, syms)
		}
	}
	mw := t.modelWord(word)
	var syms []int32
	if id, ok := t.vocab[mw]; ok && t.opts.ignoreMerges {
		syms = []int32{id}
	} else {
		syms = t.mergeSymbols(t.symbols(mw))
	}
	if cacheable {
		t.mu.Lock()
		if len(t.cache) >= maxCacheEntries {
			clear(t.cache)
		}
		t.cache[word] = syms
		t.mu.Unlock()
	}
	return appendIDs(ids, syms)
}

// modelWord is a pre-token as the model sees it: byte-level runes for a
// byte-level tokenizer, unchanged otherwise.
func (t *BPE) modelWord(word string) string {
	if t.pipeline.byteLevel {
		return byteLevelString(word)
	}
	return word
}

// symbols returns the per-character ids of word; a character outside the
// vocabulary becomes the unk id, or −1 (dropped later) without one.
func (t *BPE) symbols(word string) []int32 {
	syms := make([]int32, 0, len(word))
	for _, r := range word {
		id, ok := t.vocab[string(r)]
		if !ok {
			id = t.unk
			if t.opts.fuseUnk && id >= 0 && len(syms) > 0 && syms[len(syms)-1] == id {
				continue
			}
		}
		syms = append(syms, id)
	}
	return syms
}

// mergeSymbols applies the merge with the lowest rank, leftmost first, until
// none applies.
func (t *BPE) mergeSymbols(syms []int32) []int32 {
	for len(syms) > 1 {
		best, at := merge{rank: -1}, -1
		for i := 0; i+1 < len(syms); i++ {
			m, ok := t.merges[[2]int32{syms[i], syms[i+1]}]
			if ok && (at < 0 || m.rank < best.rank) {
				best, at = m, i
			}
		}
		if at < 0 {
			break
		}
		syms[at] = best.id
		syms = append(syms[:at+1], syms[at+2:]...)
	}
	return syms
}

func appendIDs(ids []int, syms []int32) []int {
	for _, s := range syms {
		if s >= 0 {
			ids = append(ids, int(s))
		}
	}
	return ids
}

// Decode returns the text of ids, skipping special tokens and unknown ids.
func (t *BPE) Decode(ids []int) string {
	var buf []byte
	first := true
	for _, id := range ids {
		if id < 0 || id >= len(t.tokens) || t.tokens[id] == "" || t.special[id] {
			continue
		}
		tok := t.tokens[id]
		switch t.pipeline.decoder {
		case decodeByteLevel:
			buf = appendByteLevelToken(buf, tok)
		case decodeJoinSpace:
			if !first {
				buf = append(buf, ' ')
			}
			buf = append(buf, tok...)
		default:
			buf = append(buf, tok...)
		}
		first = false
	}
	return lossyUTF8(buf)
}
