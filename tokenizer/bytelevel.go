package tokenizer

import "unicode/utf8"

// The GPT-2 byte-to-unicode table maps every byte to a printable rune so that
// byte-level tokens can be written as ordinary strings: printable Latin-1
// bytes map to themselves, the remaining 68 bytes (controls, space, and a few
// others) map in byte order to U+0100 and up. Space becomes 'Ġ' (U+0120) and
// '\n' becomes 'Ċ' (U+010A).
var (
	byteToRune [256]rune
	runeToByte = make(map[rune]byte, 256)
)

func init() {
	next := rune(256)
	for b := 0; b < 256; b++ {
		printable := (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
		r := rune(b)
		if !printable {
			r = next
			next++
		}
		byteToRune[b] = r
		runeToByte[r] = byte(b)
	}
}

// byteLevelString returns s with every byte replaced by its byte-level rune.
func byteLevelString(s string) string {
	buf := make([]byte, 0, 2*len(s))
	for i := 0; i < len(s); i++ {
		buf = utf8.AppendRune(buf, byteToRune[s[i]])
	}
	return string(buf)
}

// appendByteLevelToken appends the bytes a byte-level token stands for. Like
// the Hugging Face ByteLevel decoder, a token holding any rune outside the
// byte-level alphabet (an added token such as "<|im_start|>" written with
// other characters) contributes its own UTF-8 bytes unchanged.
func appendByteLevelToken(dst []byte, tok string) []byte {
	start := len(dst)
	for _, r := range tok {
		b, ok := runeToByte[r]
		if !ok {
			return append(dst[:start], tok...)
		}
		dst = append(dst, b)
	}
	return dst
}

// lossyUTF8 converts b to a string, replacing each maximal ill-formed
// subsequence with one U+FFFD, as Rust's String::from_utf8_lossy and the
// WHATWG TextDecoder do (and unlike strings.ToValidUTF8, which collapses a
// whole run of bad bytes into one replacement).
func lossyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out := make([]byte, 0, len(b)+8)
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r != utf8.RuneError || size > 1 {
			out = append(out, b[:size]...)
			b = b[size:]
			continue
		}
		n := maximalSubpart(b)
		out = utf8.AppendRune(out, utf8.RuneError)
		b = b[n:]
	}
	return string(out)
}

// maximalSubpart returns the length (at least 1) of the longest prefix of b
// that starts a well-formed UTF-8 sequence but does not complete it.
func maximalSubpart(b []byte) int {
	lead := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF) // allowed range of the second byte
	switch {
	case lead >= 0xC2 && lead <= 0xDF:
		need = 1
	case lead == 0xE0:
		need, lo = 2, 0xA0
	case lead >= 0xE1 && lead <= 0xEC, lead == 0xEE, lead == 0xEF:
		need = 2
	case lead == 0xED:
		need, hi = 2, 0x9F
	case lead == 0xF0:
		need, lo = 3, 0x90
	case lead >= 0xF1 && lead <= 0xF3:
		need = 3
	case lead == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	n := 1
	for ; n <= need && n < len(b); n++ {
		c := b[n]
		if n == 1 && (c < lo || c > hi) || n > 1 && (c < 0x80 || c > 0xBF) {
			break
		}
	}
	return n
}
