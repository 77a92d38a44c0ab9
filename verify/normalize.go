package verify

import (
	"regexp"
	"strings"
)

// MaxAnswerLen is the longest answer, in bytes, that Equal will examine.
// Longer answers are judged not equal without being parsed.
const MaxAnswerLen = 4096

var (
	// spacingReplacer removes LaTeX layout commands that carry no meaning and
	// unifies notation variants before parsing.
	spacingReplacer = strings.NewReplacer(
		`\\`, `\\`, // a row break, kept whole so that "\\ " is not read as "\ "
		`\displaystyle`, " ",
		`\textstyle`, " ",
		`\left.`, " ",
		`\right.`, " ",
		`\left\{`, `\{`,
		`\right\}`, `\}`,
		`\left\lvert`, "|",
		`\right\rvert`, "|",
		`\left\vert`, "|",
		`\right\vert`, "|",
		`\left|`, "|",
		`\right|`, "|",
		`\lvert`, "|",
		`\rvert`, "|",
		`\left`, " ",
		`\right`, " ",
		`\bigl`, " ",
		`\bigr`, " ",
		`\Bigl`, " ",
		`\Bigr`, " ",
		`\big`, " ",
		`\Big`, " ",
		`\!`, "",
		`\,`, " ",
		`\;`, " ",
		`\:`, " ",
		`\quad`, " ",
		`\qquad`, " ",
		`\ `, " ",
		"~", " ",
		"\n", " ",
		"\t", " ",
		"\r", " ",
		`\dfrac`, `\frac`,
		`\tfrac`, `\frac`,
		`\cfrac`, `\frac`,
		`\dbinom`, `\binom`,
		`\tbinom`, `\binom`,
		`^{\circ}`, "",
		`^\circ`, "",
		`\circ`, "",
		"°", "",
		`\degree`, "",
		`^{\prime}`, "'",
		`^\prime`, "'",
		`\prime`, "'",
		`\%`, "%",
		`\$`, "",
		"$", "",
		`\(`, " ",
		`\)`, " ",
		`\[`, " ",
		`\]`, " ",
		"np.", `\`,
		"−", "-",
		"×", `\times `,
		"·", `\cdot `,
		"π", `\pi `,
		"√", `\sqrt`,
		"∞", `\infty `,
		"≤", `\le `,
		"≥", `\ge `,
	)

	// thousandsRe matches a digit group separator written as "{,}" or "\,"
	// (the latter already turned into a space-free marker by fixThousands).
	thousandsBraceRe = regexp.MustCompile(`(\d)\{,\}(\d{3})`)
	thousandsThinRe  = regexp.MustCompile(`(\d)\\,(\d{3})`)
	plainThousandsRe = regexp.MustCompile(`^[-+]?\d{1,3}(,\d{3})+(\.\d+)?$`)
	orAndRe          = regexp.MustCompile(`\s+(or|and)\s+`)
	textCmdRe        = regexp.MustCompile(`\\(text|textbf|textit|textrm|textsf|texttt|mbox|mathrm|mathbf|mathit|mathsf|mathtt|boldsymbol|bm|operatorname)\s*\{`)
	trailingTextRe   = regexp.MustCompile(`^(.*?)\s*\\(?:text|textbf|textit|textrm|mbox|mathrm)\s*\{([^{}]*)\}\s*\.?$`)
	trailingWordRe   = regexp.MustCompile(`^(.*?)\s*([A-Za-z]+)\s*(?:\^\{?-?\d+\}?)?\s*\.?$`)
	trailingSlashRe  = regexp.MustCompile(`^(.*?)\s*(?:/|\\cdot|per)\s*$`)
)

// unitWords are short unit names stripped after a number ("5 cm", "3 h").
// Words of three or more letters that are not function names are stripped
// after a number anyway ("18 dollars", "4 apples").
var unitWords = map[string]bool{
	"m": true, "s": true, "g": true, "h": true, "K": true, "J": true, "W": true, "N": true, "V": true,
	"cm": true, "mm": true, "km": true, "nm": true, "um": true, "ft": true, "in": true, "yd": true,
	"mi": true, "lb": true, "oz": true, "ml": true, "mL": true, "hr": true, "kg": true, "mg": true,
	"Hz": true, "Pa": true, "eV": true, "AU": true, "pc": true, "ly": true, "L": true, "cc": true,
}

// functionWords are letter runs that must survive unit stripping.
var functionWords = map[string]bool{
	"sin": true, "cos": true, "tan": true, "sec": true, "csc": true, "cot": true, "exp": true,
	"log": true, "ln": true, "sqrt": true, "pi": true, "sinh": true, "cosh": true, "tanh": true,
	"arcsin": true, "arccos": true, "arctan": true,
}

// Normalize rewrites an extracted answer into the canonical text the parser
// reads: math delimiters, spacing commands, \left/\right, \text-like wrappers,
// trailing units and words after a number, degree signs, currency signs,
// thousands separators and trailing periods are removed; \dfrac and \tfrac
// become \frac; "or"/"and" between solutions become commas.
func Normalize(answer string) string {
	s := answer
	for strings.Contains(s, "{,}") || strings.Contains(s, `\,`) {
		// Matches overlap: 1{,}450{,}000 needs two passes.
		t := thousandsThinRe.ReplaceAllString(s, "$1$2")
		t = thousandsBraceRe.ReplaceAllString(t, "$1$2")
		if t == s {
			break
		}
		s = t
	}
	s = spacingReplacer.Replace(s)
	s = strings.TrimSpace(s)
	s = strings.TrimRight(s, ". ")

	if strings.IndexByte(s, '\\') >= 0 {
		// Text after a number is a unit or a noun: "18 \text{ dollars}".
		for {
			m := trailingTextRe.FindStringSubmatch(s)
			if m == nil || !numericLooking(m[1]) {
				break
			}
			s = strings.TrimSpace(m[1])
		}
		s = unwrapText(s)
	}
	if strings.Contains(s, " or ") || strings.Contains(s, " and ") {
		s = orAndRe.ReplaceAllString(s, ",")
	}
	s = strings.ReplaceAll(s, "percent", "%")
	if hasLetter(s) {
		s = stripTrailingWords(s)
	}
	s = strings.Join(strings.Fields(s), " ")
	s = strings.TrimRight(s, ". ")
	if strings.IndexByte(s, ',') >= 0 && plainThousandsRe.MatchString(s) {
		s = strings.ReplaceAll(s, ",", "")
	}
	return s
}

func hasLetter(s string) bool {
	for i := 0; i < len(s); i++ {
		if isLetter(s[i]) {
			return true
		}
	}
	return false
}

// unwrapText replaces \text{...} and similar wrappers by their content.
func unwrapText(s string) string {
	for range 64 {
		loc := textCmdRe.FindStringIndex(s)
		if loc == nil {
			return s
		}
		end := matchBrace(s, loc[1]-1)
		if end < 0 {
			// Unbalanced: drop the command name and keep the rest.
			s = s[:loc[0]] + s[loc[1]-1:]
			continue
		}
		s = s[:loc[0]] + " " + s[loc[1]:end] + " " + s[end+1:]
	}
	return s
}

// stripTrailingWords removes units and words that follow a number: "5 cm",
// "27 dollars", "3 m/s^2". Single- and two-letter words are removed only when
// they are known units, so answers such as "7.6 Z" keep their variable.
func stripTrailingWords(s string) string {
	best, cur := s, s
	for range 8 {
		m := trailingWordRe.FindStringSubmatch(cur)
		if m == nil {
			break
		}
		word := m[2]
		if !unitWords[word] && (len(word) < 3 || functionWords[word]) {
			break
		}
		cur = strings.TrimSpace(m[1])
		// "3 m/s": drop the connector and keep stripping the unit.
		if sm := trailingSlashRe.FindStringSubmatch(cur); sm != nil {
			cur = strings.TrimSpace(sm[1])
			continue
		}
		if numericLooking(cur) {
			best = cur
		}
	}
	return best
}

// numericLooking reports whether s is a number written in one of the usual
// notations (digits, fractions, scientific notation, radicals, π), with no
// variables: the only kind of answer after which trailing words are units.
func numericLooking(s string) bool {
	digit := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			digit = true
		case c == '\\':
			j := i + 1
			for j < len(s) && isLetter(s[j]) {
				j++
			}
			switch s[i+1 : j] {
			case "frac", "sqrt", "times", "cdot", "pi":
			default:
				return false
			}
			i = j - 1
		case c == 'e' || c == 'E':
			if i == 0 || !(s[i-1] >= '0' && s[i-1] <= '9') {
				return false
			}
		case strings.IndexByte(".,+-/(){}^*% ", c) >= 0:
		default:
			return false
		}
	}
	return digit
}

// matchBrace returns the index of the brace closing the one at open, or -1.
func matchBrace(s string, open int) int {
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++ // skip escaped character such as \{ or \}
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
