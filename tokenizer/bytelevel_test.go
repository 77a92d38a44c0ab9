package tokenizer

import (
	"slices"
	"testing"
	"unicode"
)

func TestByteToRuneIsPrintableBijection(t *testing.T) {
	seen := make(map[rune]bool)
	for b := 0; b < 256; b++ {
		r := byteToRune[b]
		if seen[r] {
			t.Fatalf("byte %#x maps to %q, already used", b, r)
		}
		seen[r] = true
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			t.Errorf("byte %#x maps to non-printable %U", b, r)
		}
		if runeToByte[r] != byte(b) {
			t.Errorf("runeToByte[%q] = %#x, want %#x", r, runeToByte[r], b)
		}
	}
	for b, want := range map[byte]rune{' ': 'Ġ', '\n': 'Ċ', '\t': 'ĉ', 'a': 'a', 0xC3: 'Ã', 0x00: 'Ā', 0xAD: 'Ń', 0x7F: 'ġ'} {
		if got := byteToRune[b]; got != want {
			t.Errorf("byteToRune[%#x] = %q, want %q", b, got, want)
		}
	}
}

func TestLossyUTF8(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"héllo 日本 😀", "héllo 日本 😀"},
		{"\xff\xfe", "\uFFFD\uFFFD"},                     // two invalid bytes, two replacements
		{"a\xe4\xb8b", "a\uFFFDb"},                       // truncated 3-byte sequence is one maximal subpart
		{"\xf0\x9f\x98", "\uFFFD"},                       // truncated emoji
		{"\xf0\x9f\x98!", "\uFFFD!"},                     // truncated emoji followed by ASCII
		{"\xed\xa0\x80", "\uFFFD\uFFFD\uFFFD"},           // surrogate: ED alone, then two stray continuations
		{"\xe0\x80\x80", "\uFFFD\uFFFD\uFFFD"},           // overlong
		{"\xc0\xaf", "\uFFFD\uFFFD"},                     // invalid lead byte
		{"\xf4\x90\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD"}, // above U+10FFFF
		{"\xe2\x82", "\uFFFD"},                           // truncated at end
		{"x\x80y", "x\uFFFDy"},                           // stray continuation
	} {
		if got := lossyUTF8([]byte(tc.in)); got != tc.want {
			t.Errorf("lossyUTF8(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestAppendByteLevelToken(t *testing.T) {
	for _, tc := range []struct{ tok, want string }{
		{"Ġhello", " hello"},
		{"ÃĥÃ©", "Ãé"},                   // bytes C3 83 C3 A9
		{"<|im_start|>", "<|im_start|>"}, // printable ASCII maps to itself
		{"日本", "日本"},                     // runes outside the alphabet: the token's own bytes
	} {
		if got := string(appendByteLevelToken(nil, tc.tok)); got != tc.want {
			t.Errorf("appendByteLevelToken(%q) = %q, want %q", tc.tok, got, tc.want)
		}
	}
}

func TestSplitters(t *testing.T) {
	gpt2, _ := splitterFor(GPT2Pattern)
	llama, _ := splitterFor(Llama3Pattern)
	qwen, _ := splitterFor(Qwen2Pattern)
	for _, tc := range []struct {
		name string
		sp   splitter
		in   string
		want []string
	}{
		{"gpt2 words", gpt2, "Hello world", []string{"Hello", " world"}},
		{"gpt2 contraction", gpt2, "I'm here", []string{"I", "'m", " here"}},
		{"gpt2 contraction case", gpt2, "don'T", []string{"don", "'", "T"}},
		{"gpt2 double space", gpt2, "  two  spaces", []string{" ", " two", " ", " spaces"}},
		{"gpt2 newlines", gpt2, "a\n\nb", []string{"a", "\n", "\n", "b"}},
		{"gpt2 numbers", gpt2, "x = 123.45!!", []string{"x", " =", " 123", ".", "45", "!!"}},
		{"gpt2 trailing space", gpt2, "end  ", []string{"end", "  "}},
		{"gpt2 tab word", gpt2, "\tword", []string{"\t", "word"}},
		{"gpt2 cjk emoji", gpt2, "日本語 テキスト😀", []string{"日本語", " テキスト", "😀"}},
		{"gpt2 empty", gpt2, "", nil},
		{"llama words", llama, "Hello world", []string{"Hello", " world"}},
		{"llama contraction case", llama, "don'T", []string{"don", "'T"}},
		{"llama digits", llama, "12345 apples", []string{"123", "45", " apples"}},
		{"llama newlines", llama, "a\n\nb", []string{"a", "\n\n", "b"}},
		{"llama punct newline", llama, "x = (y)\n  z", []string{"x", " =", " (", "y", ")\n", " ", " z"}},
		{"llama tab word", llama, "\tword", []string{"\tword"}},
		{"llama quote word", llama, "\"quoted\"", []string{"\"quoted", "\""}},
		{"llama spaces then newline", llama, "a  \n b", []string{"a", "  \n", " b"}},
		{"qwen digits", qwen, "12345", []string{"1", "2", "3", "4", "5"}},
		{"qwen emoji", qwen, "hi 😀😀!", []string{"hi", " 😀😀!"}},
	} {
		got := tc.sp.split(nil, tc.in)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: split(%q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
	}
	if _, ok := splitterFor(`\s+`); ok {
		t.Error(`splitterFor(\s+) accepted an unknown pattern`)
	}
}
