package verify

import (
	"fmt"
	"strings"
)

// tokKind classifies a token of normalized answer text.
type tokKind uint8

const (
	tEOF    tokKind = iota
	tNum            // decimal literal, possibly with an exponent: 12, 0.5, 4.5e33
	tIdent          // a variable: one letter, or a Greek or other unknown command
	tFunc           // a named function: sin, \ln, \exp, \arcsin, ...
	tCmd            // a structural command: \frac, \sqrt, \pi, \pm, \begin, ...
	tOp             // a one-character operator or bracket
	tRowSep         // \\ inside a matrix
)

// token is one lexical unit; text holds the digits, the name or the operator.
type token struct {
	kind       tokKind
	text       string
	start, end int // byte offsets in the source
}

// knownFuncs maps function names, with or without a backslash, to the name
// used by the evaluator.
var knownFuncs = map[string]string{
	"sin": "sin", "cos": "cos", "tan": "tan", "sec": "sec", "csc": "csc", "cot": "cot",
	"arcsin": "asin", "arccos": "acos", "arctan": "atan", "asin": "asin", "acos": "acos", "atan": "atan",
	"sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "exp": "exp", "ln": "ln", "log": "log", "lg": "log10",
	"sqrt": "sqrt", "abs": "abs",
}

// structuralCmds are commands the parser handles itself; any other command is
// a symbol (a Greek letter, \hbar, \odot, ...).
var structuralCmds = map[string]string{
	"frac": "frac", "sqrt": "sqrt", "binom": "binom", "pi": "pi", "infty": "infty", "inf": "infty",
	"pm": "pm", "mp": "mp", "cup": "cup", "begin": "begin", "end": "end", "lfloor": "lfloor",
	"rfloor": "rfloor", "lceil": "lceil", "rceil": "rceil", "langle": "langle", "rangle": "rangle",
	"le": "le", "leq": "le", "ge": "ge", "geq": "ge", "lt": "lt", "gt": "gt", "ne": "ne", "neq": "ne",
	"in": "in", "to": "to", "rightarrow": "to", "Rightarrow": "to", "implies": "to",
	"dot": "dot", "ddot": "ddot", "hat": "hat", "bar": "bar", "vec": "vec", "tilde": "tilde",
	"overline": "bar", "widehat": "hat", "widetilde": "tilde", "overrightarrow": "vec",
	"text": "text", "mathrm": "text", "mathbf": "text", "operatorname": "operatorname",
}

// lex splits normalized answer text into tokens.
func lex(s string) ([]token, error) {
	toks := make([]token, 0, len(s)/2+1)
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ':
			i++
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			j := lexNumber(s, i)
			toks = append(toks, token{tNum, s[i:j], i, j})
			i = j
		case isLetter(c):
			j := i
			for j < len(s) && isLetter(s[j]) {
				j++
			}
			toks = appendLetters(toks, s[i:j], i)
			i = j
		case c == '\\':
			if i+1 >= len(s) {
				return nil, fmt.Errorf("lone backslash at offset %d", i)
			}
			if s[i+1] == '\\' {
				toks = append(toks, token{tRowSep, `\\`, i, i + 2})
				i += 2
				continue
			}
			j := i + 1
			for j < len(s) && isLetter(s[j]) {
				j++
			}
			if j == i+1 {
				// \{, \}, \| and other escaped characters.
				toks = append(toks, token{tOp, s[i : i+2], i, i + 2})
				i += 2
				continue
			}
			name := s[i+1 : j]
			switch {
			case name == "cdot" || name == "times" || name == "ast":
				toks = append(toks, token{tOp, "*", i, j})
			case name == "div":
				toks = append(toks, token{tOp, "/", i, j})
			case name == "mid" || name == "vert":
				toks = append(toks, token{tOp, "|", i, j})
			case knownFuncs[name] != "" && name != "sqrt":
				toks = append(toks, token{tFunc, knownFuncs[name], i, j})
			case structuralCmds[name] != "":
				toks = append(toks, token{tCmd, structuralCmds[name], i, j})
			default:
				toks = append(toks, token{tIdent, `\` + name, i, j})
			}
			i = j
		case strings.IndexByte("+-*/^_()[]{},;=|&!'%<>:", c) >= 0:
			toks = append(toks, token{tOp, s[i : i+1], i, i + 1})
			i++
		default:
			// Any other byte (stray Unicode, '?', '"') is a symbol of its own,
			// so that differing texts never parse to the same tree.
			j := i + 1
			for j < len(s) && s[j] >= 0x80 && s[j] < 0xC0 {
				j++
			}
			toks = append(toks, token{tIdent, s[i:j], i, j})
			i = j
		}
	}
	return append(toks, token{kind: tEOF, start: len(s), end: len(s)}), nil
}

// lexNumber returns the end of the decimal literal starting at i: digits, an
// optional fraction and an optional exponent written e5, e-5 or E+5.
func lexNumber(s string, i int) int {
	j := i
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	if j < len(s) && s[j] == '.' {
		j++
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		k := j + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		if k < len(s) && s[k] >= '0' && s[k] <= '9' {
			for k < len(s) && s[k] >= '0' && s[k] <= '9' {
				k++
			}
			// "2e3x" is still 2000x; "3e^{2}" is 3·e², handled by not matching.
			j = k
		}
	}
	return j
}

// appendLetters splits a run of letters into function names ("sin", "pi")
// and single-letter variables.
func appendLetters(toks []token, run string, off int) []token {
	for k := 0; k < len(run); {
		best := 0
		for l := min(len(run)-k, 6); l >= 2; l-- {
			w := run[k : k+l]
			if knownFuncs[w] != "" || w == "pi" {
				best = l
				break
			}
		}
		switch {
		case best == 0:
			toks = append(toks, token{tIdent, run[k : k+1], off + k, off + k + 1})
			k++
		case run[k:k+best] == "pi":
			toks = append(toks, token{tCmd, "pi", off + k, off + k + best})
			k += best
		case run[k:k+best] == "sqrt":
			toks = append(toks, token{tCmd, "sqrt", off + k, off + k + best})
			k += best
		default:
			toks = append(toks, token{tFunc, knownFuncs[run[k:k+best]], off + k, off + k + best})
			k += best
		}
	}
	return toks
}
