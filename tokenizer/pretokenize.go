package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Pre-tokenizer regular expressions of the GPT-2 family, exactly as they
// appear in tokenizer.json files. Go's regexp lacks the negative lookahead
// they use, so each is implemented by a hand-written scanner that follows the
// regex's leftmost-first alternation and backtracking.
const (
	// GPT2Pattern is the ByteLevel pre-tokenizer's built-in regex (GPT-2,
	// RoBERTa, and the BPE tokenizers this package trains).
	GPT2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	// Llama3Pattern is the Split regex of Llama 3 tokenizers (digits in groups of up to three).
	Llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// Qwen2Pattern is the Split regex of Qwen2 and Qwen2.5 tokenizers (single digits).
	Qwen2Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// splitter cuts text into pre-tokens; it never drops characters.
type splitter struct {
	modern    bool // Llama 3 / Qwen2 alternatives instead of GPT-2's
	maxDigits int  // digits per pre-token for the modern form
}

// splitterFor returns the scanner for one of the supported patterns.
func splitterFor(pattern string) (splitter, bool) {
	switch pattern {
	case GPT2Pattern:
		return splitter{}, true
	case Llama3Pattern:
		return splitter{modern: true, maxDigits: 3}, true
	case Qwen2Pattern:
		return splitter{modern: true, maxDigits: 1}, true
	}
	return splitter{}, false
}

// split appends the pre-tokens of s to dst.
func (sp splitter) split(dst []string, s string) []string {
	for i := 0; i < len(s); {
		n := sp.match(s[i:])
		dst = append(dst, s[i:i+n])
		i += n
	}
	return dst
}

func isLetter(r rune) bool { return unicode.IsLetter(r) }
func isNumber(r rune) bool { return unicode.IsNumber(r) }
func isSpace(r rune) bool  { return unicode.Is(unicode.White_Space, r) }
func isCRLF(r rune) bool   { return r == '\r' || r == '\n' }

// isOther reports whether r belongs to [^\s\p{L}\p{N}].
func isOther(r rune) bool { return !isSpace(r) && !isLetter(r) && !isNumber(r) }

// match returns the byte length (> 0) of the pre-token starting s.
func (sp splitter) match(s string) int {
	if n := contraction(s, sp.modern); n > 0 {
		return n
	}
	r0, w0 := utf8.DecodeRuneInString(s)
	r1, w1 := utf8.DecodeRuneInString(s[w0:])
	if sp.modern {
		// [^\r\n\p{L}\p{N}]?\p{L}+
		if !isCRLF(r0) && !isLetter(r0) && !isNumber(r0) && w1 > 0 && isLetter(r1) {
			return w0 + w1 + span(s[w0+w1:], isLetter, -1)
		}
		if isLetter(r0) {
			return span(s, isLetter, -1)
		}
		// \p{N}{1,maxDigits}
		if isNumber(r0) {
			return span(s, isNumber, sp.maxDigits)
		}
		// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
		if n := optionalSpaceThen(s, r0, w0, r1, w1, isOther); n > 0 {
			return n + span(s[n:], isCRLF, -1)
		}
		// \s*[\r\n]+ : the longest whitespace prefix that ends in \r or \n.
		ws := span(s, isSpace, -1)
		if k := strings.LastIndexAny(s[:ws], "\r\n"); k >= 0 {
			return k + 1
		}
	} else {
		// ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+'
		for _, class := range []func(rune) bool{isLetter, isNumber, isOther} {
			if n := optionalSpaceThen(s, r0, w0, r1, w1, class); n > 0 {
				return n
			}
		}
	}
	// \s+(?!\S) then \s+
	ws := span(s, isSpace, -1)
	if ws == len(s) {
		return ws
	}
	_, last := utf8.DecodeLastRuneInString(s[:ws])
	if ws > last {
		return ws - last
	}
	if ws > 0 {
		return ws
	}
	return w0 // unreachable: every rune is a letter, number, space or other
}

// optionalSpaceThen matches ' ?C+' for the class C at the start of s.
func optionalSpaceThen(s string, r0 rune, w0 int, r1 rune, w1 int, class func(rune) bool) int {
	if r0 == ' ' && w1 > 0 && class(r1) {
		return w0 + w1 + span(s[w0+w1:], class, -1)
	}
	if class(r0) {
		return span(s, class, -1)
	}
	return 0
}

// span returns the byte length of the longest prefix of s whose runes are all
// in class, limited to max runes when max > 0.
func span(s string, class func(rune) bool, max int) int {
	n, count := 0, 0
	for n < len(s) && (max < 0 || count < max) {
		r, w := utf8.DecodeRuneInString(s[n:])
		if !class(r) {
			break
		}
		n += w
		count++
	}
	return n
}

// contraction matches 's|'t|'re|'ve|'m|'ll|'d, ignoring ASCII case when fold is set.
func contraction(s string, fold bool) int {
	if len(s) < 2 || s[0] != '\'' {
		return 0
	}
	for _, suffix := range []string{"s", "t", "re", "ve", "m", "ll", "d"} {
		if len(s) < 1+len(suffix) {
			continue
		}
		got := s[1 : 1+len(suffix)]
		if got == suffix || fold && strings.EqualFold(got, suffix) && isASCII(got) {
			return 1 + len(suffix)
		}
	}
	return 0
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
