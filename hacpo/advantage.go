package hacpo

import (
	"fmt"
	"math"
)

// Response is one response of a prompt's joint group as the advantage sees it.
type Response struct {
	Source int     // index of the agent that generated it
	Reward float64 // verifier reward (0/1 in the paper; the binary guard assumes [0, 1])
}

// OmegaFunc returns ω(a, b) = clamp(P̂a / P̂b, 0.1, 10). (*CapabilityTracker).Omega
// and OmegaMatrix.Omega are OmegaFuncs.
type OmegaFunc func(a, b int) float64

// BaselineCase tells which rule produced a group's baseline.
type BaselineCase uint8

const (
	// BaselineEmpty: the group has no response the learner uses.
	BaselineEmpty BaselineCase = iota
	// BaselinePlain: the plain mean of the raw rewards (capability weighting off).
	BaselinePlain
	// BaselineWeighted: Eq 7, the capability-weighted mean.
	BaselineWeighted
	// BaselineUniform: all rewards identical, plain mean (edge case 1, spec §2.1).
	BaselineUniform
	// BaselineGuard: the weighted mean exceeded 1; the learner's own mean (edge case 2).
	BaselineGuard
	// BaselineGuardNoSelf: the weighted mean exceeded 1 and the group has no response
	// of the learner; the plain mean of the raw rewards instead (package decision).
	BaselineGuardNoSelf
)

func (c BaselineCase) String() string {
	switch c {
	case BaselineEmpty:
		return "empty"
	case BaselinePlain:
		return "plain"
	case BaselineWeighted:
		return "weighted"
	case BaselineUniform:
		return "uniform"
	case BaselineGuard:
		return "guard"
	case BaselineGuardNoSelf:
		return "guard-no-self"
	}
	return fmt.Sprintf("BaselineCase(%d)", uint8(c))
}

// GroupAdvantage describes one prompt group's advantage computation for a learner.
type GroupAdvantage struct {
	Baseline    float64      // μ̂ (Eq 7 or the rule named by Case)
	Std         float64      // sample std (N − 1) of the raw rewards used; 0 with fewer than 2
	Denominator float64      // what the numerator was divided by: Std + ε, or 1 (+ ε) (see package doc)
	Used        int          // number of responses the learner uses
	Case        BaselineCase // rule that produced Baseline
}

// Advantages returns learner k's advantage (Eq 6, before ω) for every response of
// one prompt's joint group, in the group's order:
//
//	A_i = (R_i − μ̂^(k)) / (σ_joint + ε),  μ̂^(k) = (1/|group|) Σ_i ω(k, src_i)·R_i  (Eq 7)
//
// with the edge cases and switches of s (see the package doc). omega may be nil when
// s.CapabilityBaseline is off. Groups may have unequal counts per source. When
// s.SharesRollouts is off, responses of other agents are ignored (advantage 0) and
// the group statistics use the learner's own responses only.
func (s Settings) Advantages(learner int, group []Response, omega OmegaFunc) ([]float64, error) {
	adv := make([]float64, len(group))
	_, err := s.GroupAdvantages(learner, group, omega, adv)
	return adv, err
}

// GroupAdvantages is Advantages writing into adv (len(adv) == len(group)) and
// reporting the group's baseline, std and rule. It does not allocate. With
// AdvantageStd batch the denominator is the step's: use BatchAdvantages.
func (s Settings) GroupAdvantages(learner int, group []Response, omega OmegaFunc, adv []float64) (GroupAdvantage, error) {
	if s.NormalizeStd && s.AdvantageStd == BatchStd {
		return GroupAdvantage{}, fmt.Errorf("hacpo: advantages: method %q scales by the batch std (advantage_std %q), which one group cannot give: use BatchAdvantages", s.Method, BatchStd)
	}
	return s.groupAdvantages(learner, group, omega, adv, math.NaN())
}

// groupAdvantages is GroupAdvantages dividing by den instead of the group's
// own denominator when den is not NaN.
func (s Settings) groupAdvantages(learner int, group []Response, omega OmegaFunc, adv []float64, den float64) (GroupAdvantage, error) {
	var g GroupAdvantage
	if len(adv) != len(group) {
		return g, fmt.Errorf("hacpo: advantages: output has %d slots for %d responses", len(adv), len(group))
	}
	if learner < 0 {
		return g, fmt.Errorf("hacpo: advantages: learner index %d < 0", learner)
	}
	uses := func(r Response) bool { return s.SharesRollouts || r.Source == learner }

	// Pass 1: validate; counts, raw sum, uniformity, own sum.
	n, own := 0, 0
	sum, ownSum := 0.0, 0.0
	first, uniform := 0.0, true
	for i, r := range group {
		if r.Source < 0 {
			return g, fmt.Errorf("hacpo: advantages: response %d has source %d < 0", i, r.Source)
		}
		if !finite(r.Reward) {
			return g, fmt.Errorf("hacpo: advantages: response %d (agent %d) has reward %v", i, r.Source, r.Reward)
		}
		if !uses(r) {
			continue
		}
		if n == 0 {
			first = r.Reward
		} else if r.Reward != first {
			uniform = false
		}
		n++
		sum += r.Reward
		if r.Source == learner {
			own++
			ownSum += r.Reward
		}
	}
	for i := range adv {
		adv[i] = 0
	}
	g.Used = n
	if n == 0 {
		g.Case = BaselineEmpty
		return g, nil
	}
	mean := sum / float64(n)

	// Baseline.
	switch {
	case s.UniformFallback && uniform:
		g.Baseline, g.Case = mean, BaselineUniform
	case !s.CapabilityBaseline:
		g.Baseline, g.Case = mean, BaselinePlain
	default:
		if omega == nil {
			return g, fmt.Errorf("hacpo: advantages: method %q uses the capability baseline but no ω was given", s.Method)
		}
		// Eq 7 anchored at the reward of a plain failure (decision 32):
		// RewardMin + (1/n) Σ ω·(R − RewardMin), Eq 7 itself for RewardMin = 0.
		wsum, lo := 0.0, s.RewardMin
		lastSrc, lastW := learner, 1.0 // ω of the previous response's source (groups are usually source-major)
		for i, r := range group {
			if !uses(r) {
				continue
			}
			if r.Source != lastSrc {
				lastSrc, lastW = r.Source, 1.0
				if r.Source != learner {
					lastW = omega(learner, r.Source)
					if !(lastW > 0) || math.IsInf(lastW, 0) {
						return g, fmt.Errorf("hacpo: advantages: ω(%d, %d) = %v for response %d; want finite and > 0", learner, r.Source, lastW, i)
					}
				}
			}
			wsum += lastW * (r.Reward - lo)
		}
		g.Baseline, g.Case = lo+wsum/float64(n), BaselineWeighted
		if s.BinaryGuard && g.Baseline > s.RewardMax {
			if own > 0 {
				g.Baseline, g.Case = ownSum/float64(own), BaselineGuard
			} else {
				g.Baseline, g.Case = mean, BaselineGuardNoSelf
			}
		}
	}

	// Joint sample std of the raw rewards (two-pass).
	if n > 1 {
		ss := 0.0
		for _, r := range group {
			if uses(r) {
				d := r.Reward - mean
				ss += d * d
			}
		}
		g.Std = math.Sqrt(ss / float64(n-1))
	}
	switch {
	case !s.NormalizeStd:
		g.Denominator = 1
	case !math.IsNaN(den):
		g.Denominator = den
	case n > 1:
		g.Denominator = g.Std + s.AdvantageEpsilon
	default:
		g.Denominator = 1 + s.AdvantageEpsilon
	}
	for i, r := range group {
		if uses(r) {
			adv[i] = (r.Reward - g.Baseline) / g.Denominator
		}
	}
	return g, nil
}

// BatchAdvantages runs Advantages over a step's prompt groups: out[p][i] is
// the advantage of groups[p][i]. With AdvantageStd batch every group is
// divided by the step's std (BatchStd) plus ε; otherwise each by its own.
// It allocates once.
func (s Settings) BatchAdvantages(learner int, groups [][]Response, omega OmegaFunc) ([][]float64, error) {
	total := 0
	for _, g := range groups {
		total += len(g)
	}
	den := math.NaN()
	if s.NormalizeStd && s.AdvantageStd == BatchStd {
		std, n, err := s.BatchStd(learner, groups)
		if err != nil {
			return nil, err
		}
		den = 1 + s.AdvantageEpsilon
		if n > 1 {
			den = std + s.AdvantageEpsilon
		}
	}
	flat := make([]float64, total)
	out := make([][]float64, len(groups))
	off := 0
	for p, g := range groups {
		out[p] = flat[off : off+len(g) : off+len(g)]
		off += len(g)
		if _, err := s.groupAdvantages(learner, g, omega, out[p], den); err != nil {
			return nil, fmt.Errorf("prompt group %d: %w", p, err)
		}
	}
	return out, nil
}

// BatchStd is the sample std (N − 1) of the raw rewards of every response in
// groups that the learner uses, and their number N (std 0 when N < 2): TRL's
// scale_rewards "batch", the mean staying per group.
func (s Settings) BatchStd(learner int, groups [][]Response) (std float64, n int, err error) {
	sum := 0.0
	for p, g := range groups {
		for i, r := range g {
			if !finite(r.Reward) {
				return 0, 0, fmt.Errorf("hacpo: advantages: prompt group %d: response %d (agent %d) has reward %v", p, i, r.Source, r.Reward)
			}
			if s.SharesRollouts || r.Source == learner {
				sum += r.Reward
				n++
			}
		}
	}
	if n < 2 {
		return 0, n, nil
	}
	mean, ss := sum/float64(n), 0.0
	for _, g := range groups {
		for _, r := range g {
			if s.SharesRollouts || r.Source == learner {
				d := r.Reward - mean
				ss += d * d
			}
		}
	}
	return math.Sqrt(ss / float64(n-1)), n, nil
}
