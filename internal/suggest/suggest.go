// Package suggest finds the name a mistyped one was likely meant to be, for
// the "did you mean" of an error that lists the valid names (a config key, a
// benchmark, a split).
package suggest

import "strings"

// Closest is the name in valid nearest to s by edit distance (case aside),
// when it is near enough to be a likely typo — fewer than len(s)/3+2 edits —
// else "". Of names equally near, the first in valid wins.
func Closest(s string, valid []string) string {
	best, bestD := "", len(s)/3+2
	for _, v := range valid {
		if d := distance(strings.ToLower(s), strings.ToLower(v)); d < bestD {
			best, bestD = v, d
		}
	}
	return best
}

// distance is the Levenshtein distance between a and b, in bytes.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
