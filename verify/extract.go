package verify

import (
	"regexp"
	"strings"
)

// MaxResponseLen bounds the part of a response searched for an answer; only
// the last MaxResponseLen bytes of a longer response are examined.
const MaxResponseLen = 1 << 20

var (
	answerIsRe  = regexp.MustCompile(`(?i)(?:final answer|the answer)\s*(?:is|:)\s*:?`)
	lastNumRe   = regexp.MustCompile(`-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:/\d+)?|-?\.\d+`)
	mathSpanRe  = regexp.MustCompile(`^\$+([^$]+)\$+`)
	sentenceEnd = regexp.MustCompile(`\.(\s|$)`)
)

// Extract returns the final answer in a model's response, trying in order:
// the last \boxed{...} or \fbox{...} (braces matched), the text after the last
// "the answer is" / "final answer:", the number after GSM8K's "####", and
// the last number. ok is false when none is found.
func Extract(response string) (answer string, ok bool) {
	defer func() {
		if recover() != nil {
			answer, ok = "", false
		}
	}()
	return extract(response)
}

// extract is Extract without the recover, so that tests and fuzzing see any
// panic.
func extract(response string) (string, bool) {
	if len(response) > MaxResponseLen {
		response = response[len(response)-MaxResponseLen:]
	}
	if a, ok := extractMarked(response); ok {
		return a, true
	}
	if nums := lastNumRe.FindAllString(response, -1); nums != nil {
		return nums[len(nums)-1], true
	}
	return "", false
}

// extractMarked finds an answer that the response marks as one: a \boxed or
// \fbox, "the answer is", or "####"; not the last-number fallback.
func extractMarked(response string) (string, bool) {
	if a, ok := lastBoxed(response); ok {
		return a, true
	}
	if locs := answerIsRe.FindAllStringIndex(response, -1); locs != nil {
		if a := answerAfter(response[locs[len(locs)-1][1]:]); a != "" {
			return a, true
		}
	}
	if k := strings.LastIndex(response, "####"); k >= 0 {
		rest := strings.TrimSpace(response[k+4:])
		if line, _, _ := strings.Cut(rest, "\n"); strings.TrimSpace(line) != "" {
			return strings.TrimSpace(line), true
		}
	}
	return "", false
}

// lastBoxed returns the content of the last well-formed \boxed or \fbox. It
// runs in linear time: brace pairs are matched in one pass.
func lastBoxed(s string) (string, bool) {
	var starts []int // offsets just past each \boxed or \fbox
	for i := 0; i < len(s); {
		k := strings.IndexByte(s[i:], '\\')
		if k < 0 {
			break
		}
		i += k
		switch {
		case strings.HasPrefix(s[i:], `\boxed`):
			i += len(`\boxed`)
			starts = append(starts, i)
		case strings.HasPrefix(s[i:], `\fbox`):
			i += len(`\fbox`)
			starts = append(starts, i)
		default:
			i++
		}
	}
	if len(starts) == 0 {
		return "", false
	}
	var closeOf map[int]int // opening brace offset → closing brace offset
	for j := len(starts) - 1; j >= 0; j-- {
		rest := s[starts[j]:]
		trimmed := strings.TrimLeft(rest, " ")
		switch {
		case strings.HasPrefix(trimmed, "{"):
			if closeOf == nil {
				closeOf = matchAllBraces(s)
			}
			open := starts[j] + len(rest) - len(trimmed)
			if end, ok := closeOf[open]; ok {
				if a := strings.TrimSpace(s[open+1 : end]); a != "" {
					return a, true
				}
			}
		case len(trimmed) < len(rest) && trimmed != "":
			// "\boxed 5": the argument runs to the next space or $.
			stop := strings.IndexAny(trimmed, " $\n")
			if stop < 0 {
				stop = len(trimmed)
			}
			return trimmed[:stop], true
		}
	}
	return "", false
}

// matchAllBraces pairs the unescaped braces of s.
func matchAllBraces(s string) map[int]int {
	pairs := map[int]int{}
	var stack []int
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '{':
			stack = append(stack, i)
		case '}':
			if n := len(stack); n > 0 {
				pairs[stack[n-1]] = i
				stack = stack[:n-1]
			}
		}
	}
	return pairs
}

// answerAfter takes the answer from the text following "the answer is": a
// leading $...$ span, else the text up to the end of the sentence or line.
func answerAfter(rest string) string {
	rest = strings.TrimSpace(rest)
	if m := mathSpanRe.FindStringSubmatch(rest); m != nil {
		return strings.TrimSpace(m[1])
	}
	line, _, _ := strings.Cut(rest, "\n")
	if loc := sentenceEnd.FindStringIndex(line); loc != nil {
		line = line[:loc[0]]
	}
	return strings.TrimSpace(line)
}
