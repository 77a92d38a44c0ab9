// Package evalmetric computes evaluation statistics from per-problem samples:
// greedy accuracy, avg@k (mean correctness of k samples), pass@k (the
// unbiased estimator of Chen et al., 2021) and maj@k (majority vote over
// extracted answers, grouped by a caller-supplied equivalence).
//
// Every function is pure: samples in, numbers out. Per-problem sample lists
// are in generation order; functions that use k samples take the first k.
package evalmetric

import (
	"errors"
	"fmt"
	"math"
)

// Sample is one judged response.
type Sample struct {
	Answer    string // the extracted final answer; meaningful when HasAnswer
	HasAnswer bool   // whether an answer could be extracted
	Correct   bool   // whether the response was judged correct
}

// ErrNoProblems is returned for an empty problem list.
var ErrNoProblems = errors.New("evalmetric: no problems")

// Accuracy is the fraction of true values: the greedy accuracy when each
// value is one problem's greedy (temperature 0) response.
func Accuracy(correct []bool) (float64, error) {
	if len(correct) == 0 {
		return 0, ErrNoProblems
	}
	return float64(count(correct)) / float64(len(correct)), nil
}

// AvgAtK is the mean over problems of the fraction of correct responses among
// each problem's first k samples.
func AvgAtK(correct [][]bool, k int) (float64, error) {
	if err := checkK(correct, k); err != nil {
		return 0, err
	}
	sum := 0.0
	for _, cs := range correct {
		sum += float64(count(cs[:k])) / float64(k)
	}
	return sum / float64(len(correct)), nil
}

// PassAtK is the unbiased estimate, from n samples of which c are correct, of
// the probability that at least one of k samples is correct:
// 1 − C(n−c, k) / C(n, k). It is computed as 1 − ∏_{i=n−c+1}^{n} (1 − k/i),
// which stays accurate for large n. It requires 0 ≤ c ≤ n and 1 ≤ k ≤ n.
func PassAtK(n, c, k int) (float64, error) {
	if c < 0 || c > n || k < 1 || k > n {
		return 0, fmt.Errorf("evalmetric: pass@k needs 0 <= c <= n and 1 <= k <= n, got n=%d c=%d k=%d", n, c, k)
	}
	if n-c < k {
		return 1, nil
	}
	// log ∏ (1 − k/i) summed with Log1p keeps precision when k/i is small.
	logFail := 0.0
	for i := n - c + 1; i <= n; i++ {
		logFail += math.Log1p(-float64(k) / float64(i))
	}
	return -math.Expm1(logFail), nil
}

// MeanPassAtK is the mean over problems of PassAtK, each problem's n being
// its number of samples (at least k) and c its correct ones.
func MeanPassAtK(correct [][]bool, k int) (float64, error) {
	if err := checkK(correct, k); err != nil {
		return 0, err
	}
	sum := 0.0
	for _, cs := range correct {
		p, err := PassAtK(len(cs), count(cs), k)
		if err != nil {
			return 0, err
		}
		sum += p
	}
	return sum / float64(len(correct)), nil
}

// Majority returns the winning answer of a vote among samples and its number
// of votes. Samples without an answer do not vote. Each answer joins the
// first group whose first answer it equals (equal(groupFirst, answer)), so
// that equivalent forms ("0.5", "\frac{1}{2}") vote together. The group with
// the most votes wins; a tie goes to the group whose first answer came
// earliest. The winner is that group's first sample. ok is false when no
// sample has an answer.
func Majority(samples []Sample, equal func(a, b string) bool) (winner Sample, votes int, ok bool) {
	type group struct {
		first Sample
		votes int
	}
	var groups []group
	for _, s := range samples {
		if !s.HasAnswer {
			continue
		}
		joined := false
		for i := range groups {
			if equal(groups[i].first.Answer, s.Answer) {
				groups[i].votes++
				joined = true
				break
			}
		}
		if !joined {
			groups = append(groups, group{first: s, votes: 1})
		}
	}
	best := -1
	for i, g := range groups {
		if best < 0 || g.votes > groups[best].votes {
			best = i
		}
	}
	if best < 0 {
		return Sample{}, 0, false
	}
	return groups[best].first, groups[best].votes, true
}

// MajAtK is the fraction of problems whose majority answer among their first
// k samples (see Majority) is correct; a problem with no answers counts as
// wrong. The winner's correctness is that of the first sample of its group.
func MajAtK(samples [][]Sample, k int, equal func(a, b string) bool) (float64, error) {
	if err := checkK(samples, k); err != nil {
		return 0, err
	}
	right := 0
	for _, ss := range samples {
		if w, _, ok := Majority(ss[:k], equal); ok && w.Correct {
			right++
		}
	}
	return float64(right) / float64(len(samples)), nil
}

// Correct returns the correctness of each sample, problem by problem, for
// AvgAtK and MeanPassAtK.
func Correct(samples [][]Sample) [][]bool {
	out := make([][]bool, len(samples))
	for i, ss := range samples {
		out[i] = make([]bool, len(ss))
		for j, s := range ss {
			out[i][j] = s.Correct
		}
	}
	return out
}

func count(cs []bool) int {
	n := 0
	for _, c := range cs {
		if c {
			n++
		}
	}
	return n
}

// checkK checks that there are problems, k >= 1, and each problem has at
// least k samples.
func checkK[T any](problems [][]T, k int) error {
	if len(problems) == 0 {
		return ErrNoProblems
	}
	if k < 1 {
		return fmt.Errorf("evalmetric: k = %d, want k >= 1", k)
	}
	for i, ps := range problems {
		if len(ps) < k {
			return fmt.Errorf("evalmetric: problem %d has %d samples, want at least k = %d", i, len(ps), k)
		}
	}
	return nil
}
