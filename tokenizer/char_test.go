package tokenizer

import (
	"slices"
	"strings"
	"testing"
)

func TestNewChar(t *testing.T) {
	tok, err := NewChar("0123456789+-= \nab日😀é", []string{"<bos>", "<eos>", "<pad>"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tok.Special(), (Specials{BOS: 0, EOS: 1, PAD: 2, UNK: 3}); got != want {
		t.Errorf("Special = %+v, want %+v", got, want)
	}
	if got, want := tok.VocabSize(), 4+20; got != want {
		t.Errorf("VocabSize = %d, want %d", got, want)
	}
	id := func(s string) int {
		i, ok := tok.TokenID(s)
		if !ok {
			t.Fatalf("TokenID(%q) missing", s)
		}
		return i
	}
	for _, tc := range []struct {
		text    string
		want    []int
		decoded string
	}{
		{"", nil, ""},
		{"12+3=15", []int{5, 6, 14, 7, 16, 5, 9}, "12+3=15"},
		{"日😀é a\n", []int{id("日"), id("😀"), id("é"), id(" "), id("a"), id("\n")}, "日😀é a\n"},
		{"<bos>1<eos><pad>", []int{0, 5, 1, 2}, "1"}, // special texts map to their ids
		{"aXb", []int{id("a"), 3, id("b")}, "ab"},    // unknown char → <unk>, skipped by Decode
		{"ÄÖ", []int{3, 3}, ""},                      // one <unk> per unknown char
		{"<unk>", []int{3}, ""},                      // the text of the unknown token itself
		{"<bo", []int{3, id("b"), 3}, "b"},           // a partial special is ordinary text
		{"e\u0301", []int{3, 3}, ""},                 // no normalization: e + combining acute are unknown
	} {
		got := tok.Encode(tc.text)
		if !slices.Equal(got, tc.want) {
			t.Errorf("Encode(%q) = %v, want %v", tc.text, got, tc.want)
		}
		if dec := tok.Decode(got); dec != tc.decoded {
			t.Errorf("Decode(Encode(%q)) = %q, want %q", tc.text, dec, tc.decoded)
		}
	}
	if got := tok.Decode([]int{5, -1, 999, 6}); got != "12" {
		t.Errorf("Decode skips ids outside the vocabulary: got %q", got)
	}
}

func TestNewCharUnknownToken(t *testing.T) {
	tok, err := NewChar("ab", []string{"[UNK]", "</s>"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tok.Special(), (Specials{BOS: -1, EOS: 1, PAD: -1, UNK: 0}); got != want {
		t.Errorf("Special = %+v, want %+v", got, want)
	}
	if got := tok.Encode("abc"); !slices.Equal(got, []int{2, 3, 0}) {
		t.Errorf("Encode(abc) = %v", got)
	}
	none, err := NewChar("ab", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := none.Special(); got != (Specials{BOS: -1, EOS: -1, PAD: -1, UNK: 0}) {
		t.Errorf("no specials: Special = %+v, want <unk> added as 0", got)
	}
}

func TestNewCharErrors(t *testing.T) {
	for _, tc := range []struct {
		alphabet string
		specials []string
		want     string
	}{
		{"", nil, "empty alphabet"},
		{"ab", []string{""}, "special token 0 is empty"},
		{"ab", []string{"<s>", "<s>"}, "appears twice"},
		{"ab", []string{"a"}, "also an alphabet character"},
		{"a\xffb", nil, "not valid UTF-8"},
	} {
		_, err := NewChar(tc.alphabet, tc.specials)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewChar(%q, %q): err = %v, want %q", tc.alphabet, tc.specials, err, tc.want)
		}
	}
}
