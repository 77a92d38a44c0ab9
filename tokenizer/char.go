package tokenizer

import (
	"encoding/json"
	"fmt"
	"slices"
	"unicode/utf8"
)

// Char is a char-level tokenizer: one token per Unicode character of its
// alphabet, characters outside it encoding to the unknown token. It is stored
// as a BPE model with no merges, no pre-tokenizer and a Fuse decoder, which
// the Hugging Face libraries load and encode the same way.
type Char struct {
	*BPE
}

// NewChar returns a char-level tokenizer. The special tokens take ids 0, 1,
// … in the order given, followed by the distinct characters of alphabet in
// order of first appearance. Unless a special token is named in UNKNames,
// "<unk>" is added after the others as the unknown token.
func NewChar(alphabet string, specials []string) (*Char, error) {
	if !utf8.ValidString(alphabet) {
		return nil, fmt.Errorf("tokenizer: alphabet is not valid UTF-8")
	}
	tokens, err := specialTokens(specials)
	if err != nil {
		return nil, err
	}
	unk := -1
	for i, s := range tokens {
		if slices.Contains(UNKNames, s) {
			unk = i
		}
	}
	if unk < 0 {
		unk = len(tokens)
		tokens = append(tokens, UNKNames[0])
	}
	added := addedTokens(tokens)
	seen := make(map[string]bool)
	for _, s := range tokens {
		seen[s] = true
	}
	for _, r := range alphabet {
		c := string(r)
		if r == utf8.RuneError {
			return nil, fmt.Errorf("tokenizer: alphabet contains U+FFFD")
		}
		if seen[c] {
			if slices.Contains(tokens[:len(added)], c) {
				return nil, fmt.Errorf("tokenizer: special token %q is also an alphabet character", c)
			}
			continue
		}
		seen[c] = true
		tokens = append(tokens, c)
	}
	if len(tokens) == len(added) {
		return nil, fmt.Errorf("tokenizer: empty alphabet")
	}
	raw := rawSections{decoder: json.RawMessage(`{"type":"Fuse"}`)}
	t := newBPE(tokens, nil, added, int32(unk), modelOptions{}, pipeline{decoder: decodeFuse}, raw)
	return &Char{BPE: t}, nil
}

// specialTokens validates a list of special tokens.
func specialTokens(specials []string) ([]string, error) {
	tokens := make([]string, 0, len(specials)+1)
	for i, s := range specials {
		if s == "" {
			return nil, fmt.Errorf("tokenizer: special token %d is empty", i)
		}
		if !utf8.ValidString(s) {
			return nil, fmt.Errorf("tokenizer: special token %q is not valid UTF-8", s)
		}
		if slices.Contains(tokens, s) {
			return nil, fmt.Errorf("tokenizer: special token %q appears twice", s)
		}
		tokens = append(tokens, s)
	}
	return tokens, nil
}

// addedTokens marks tokens[i] as special added token i.
func addedTokens(tokens []string) []addedToken {
	added := make([]addedToken, len(tokens))
	for i, s := range tokens {
		added[i] = addedToken{ID: i, Content: s, Special: true}
	}
	return added
}
