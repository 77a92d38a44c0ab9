package tokenizer

import (
	"container/heap"
	"context"
	"encoding/json"
	"fmt"
	"sort"
)

// minPairCount is the fewest occurrences a pair needs to be merged: a pair
// seen once teaches nothing about unseen text.
const minPairCount = 2

// TrainBPE learns a byte-level BPE tokenizer of at most vocabSize tokens
// from corpus. The special tokens take ids 0, 1, … in the order given, the
// 256 byte tokens follow in byte order, and each learned merge adds one
// token. Text is pre-tokenized with GPT2Pattern, so merges never cross word
// boundaries.
//
// The loop repeatedly merges the most frequent adjacent pair, counting each
// distinct word once per occurrence in the corpus. Ties go to the pair whose
// left token id is smallest, then whose right token id is smallest, so the
// same corpus always gives the same tokenizer. Training stops early when no
// pair occurs at least twice. A pair whose merged string already exists (two
// merge paths to one string) is recorded as a merge without a new token.
func TrainBPE(ctx context.Context, corpus []string, vocabSize int, specials []string) (*BPE, error) {
	tokens, err := specialTokens(specials)
	if err != nil {
		return nil, err
	}
	added := addedTokens(tokens)
	if min := len(tokens) + 256; vocabSize < min {
		return nil, fmt.Errorf("tokenizer: vocabulary size %d is below %d (%d special tokens + 256 bytes)", vocabSize, min, len(tokens))
	}
	ids := make(map[string]int32, vocabSize)
	for i, s := range tokens {
		ids[s] = int32(i)
	}
	for b := 0; b < 256; b++ {
		s := string(byteToRune[b])
		ids[s] = int32(len(tokens))
		tokens = append(tokens, s)
	}
	words, err := countWords(ctx, corpus, specials, ids)
	if err != nil {
		return nil, err
	}
	tr := newTrainer(words)
	var merges [][2]int32
	for len(tokens) < vocabSize {
		if len(merges)%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("tokenizer: training stopped after %d merges: %w", len(merges), err)
			}
		}
		p, ok := tr.best()
		if !ok {
			break
		}
		s := tokens[p[0]] + tokens[p[1]]
		id, exists := ids[s]
		if !exists {
			id = int32(len(tokens))
			ids[s] = id
			tokens = append(tokens, s)
		}
		merges = append(merges, p)
		tr.apply(p, id)
	}
	raw := rawSections{
		preTokenizer: json.RawMessage(`{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true}`),
		decoder:      json.RawMessage(`{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true}`),
	}
	p := pipeline{byteLevel: true, byteLevelRegex: true, decoder: decodeByteLevel}
	return newBPE(tokens, merges, added, -1, modelOptions{}, p, raw), nil
}

type trainWord struct {
	syms  []int32
	count int64
}

// countWords pre-tokenizes the corpus and returns its distinct byte-level
// words, in sorted order, as token-id sequences with their counts. Added
// tokens in the text are cut out, as Encode does.
func countWords(ctx context.Context, corpus, specials []string, ids map[string]int32) ([]trainWord, error) {
	specials = append([]string(nil), specials...)
	sort.Slice(specials, func(i, j int) bool {
		return len(specials[i]) > len(specials[j]) || len(specials[i]) == len(specials[j]) && specials[i] < specials[j]
	})
	counts := make(map[string]int64)
	var pieces []string
	for i, doc := range corpus {
		if i%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("tokenizer: counting words: %w", err)
			}
		}
		for _, seg := range cutSpecials(doc, specials) {
			pieces = splitter{}.split(pieces[:0], seg)
			for _, w := range pieces {
				counts[w]++
			}
		}
	}
	keys := make([]string, 0, len(counts))
	for w := range counts {
		keys = append(keys, w)
	}
	sort.Strings(keys)
	words := make([]trainWord, len(keys))
	for i, w := range keys {
		syms := make([]int32, len(w))
		for k := 0; k < len(w); k++ {
			syms[k] = ids[string(byteToRune[w[k]])]
		}
		words[i] = trainWord{syms: syms, count: counts[w]}
	}
	return words, nil
}

// cutSpecials returns the parts of text between occurrences of specials
// (sorted longest first).
func cutSpecials(text string, specials []string) []string {
	if len(specials) == 0 {
		return []string{text}
	}
	var parts []string
	start := 0
	for i := 0; i < len(text); i++ {
		for _, s := range specials {
			if len(text)-i >= len(s) && text[i:i+len(s)] == s {
				parts = append(parts, text[start:i])
				i += len(s) - 1
				start = i + 1
				break
			}
		}
	}
	return append(parts, text[start:])
}

// trainer keeps pair counts up to date as merges are applied.
type trainer struct {
	words  []trainWord
	counts map[[2]int32]int64
	where  map[[2]int32][]int32 // words that may contain the pair (a superset)
	queue  pairQueue
	stamp  []int // last merge that visited each word
	step   int
}

func newTrainer(words []trainWord) *trainer {
	tr := &trainer{
		words:  words,
		counts: make(map[[2]int32]int64),
		where:  make(map[[2]int32][]int32),
		stamp:  make([]int, len(words)),
	}
	for w, word := range words {
		for i := 0; i+1 < len(word.syms); i++ {
			p := [2]int32{word.syms[i], word.syms[i+1]}
			tr.counts[p] += word.count
			tr.where[p] = append(tr.where[p], int32(w))
		}
	}
	for p, n := range tr.counts {
		tr.queue = append(tr.queue, pairCount{p, n})
	}
	heap.Init(&tr.queue)
	return tr
}

// best returns the most frequent pair, skipping stale queue entries.
func (tr *trainer) best() ([2]int32, bool) {
	for tr.queue.Len() > 0 {
		top := tr.queue[0]
		if tr.counts[top.pair] != top.count {
			heap.Pop(&tr.queue)
			continue
		}
		if top.count < minPairCount {
			return [2]int32{}, false
		}
		return top.pair, true
	}
	return [2]int32{}, false
}

// apply replaces every occurrence of p by id and updates the counts.
func (tr *trainer) apply(p [2]int32, id int32) {
	tr.step++
	changed := make(map[[2]int32]bool)
	for _, w := range tr.where[p] {
		if tr.stamp[w] == tr.step {
			continue
		}
		tr.stamp[w] = tr.step
		word := &tr.words[w]
		if !containsPair(word.syms, p) {
			continue
		}
		for i := 0; i+1 < len(word.syms); i++ {
			q := [2]int32{word.syms[i], word.syms[i+1]}
			tr.counts[q] -= word.count
			changed[q] = true
		}
		out := word.syms[:0]
		for i := 0; i < len(word.syms); i++ {
			if i+1 < len(word.syms) && word.syms[i] == p[0] && word.syms[i+1] == p[1] {
				out = append(out, id)
				i++
			} else {
				out = append(out, word.syms[i])
			}
		}
		word.syms = out
		for i := 0; i+1 < len(out); i++ {
			q := [2]int32{out[i], out[i+1]}
			tr.counts[q] += word.count
			changed[q] = true
			if out[i] == id || out[i+1] == id {
				tr.where[q] = append(tr.where[q], w)
			}
		}
	}
	delete(tr.where, p)
	for q := range changed {
		n := tr.counts[q]
		if n <= 0 {
			delete(tr.counts, q)
			continue
		}
		heap.Push(&tr.queue, pairCount{q, n})
	}
}

func containsPair(syms []int32, p [2]int32) bool {
	for i := 0; i+1 < len(syms); i++ {
		if syms[i] == p[0] && syms[i+1] == p[1] {
			return true
		}
	}
	return false
}

type pairCount struct {
	pair  [2]int32
	count int64
}

// pairQueue is a max-heap by count, then smallest pair.
type pairQueue []pairCount

func (q pairQueue) Len() int { return len(q) }
func (q pairQueue) Less(i, j int) bool {
	a, b := q[i], q[j]
	if a.count != b.count {
		return a.count > b.count
	}
	if a.pair[0] != b.pair[0] {
		return a.pair[0] < b.pair[0]
	}
	return a.pair[1] < b.pair[1]
}
func (q pairQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *pairQueue) Push(x any)   { *q = append(*q, x.(pairCount)) }
func (q *pairQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}
