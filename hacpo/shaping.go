package hacpo

import (
	"fmt"
	"math"
)

// OverlongReward is DAPO's soft overlong punishment of a response of length
// tokens whose agent may write at most maxLen (its max_new_tokens): 0 up to
// maxLen − OverlongBuffer tokens, then falling linearly to −OverlongPenalty at
// maxLen,
//
//	min(−(length − (maxLen − OverlongBuffer)) / OverlongBuffer · OverlongPenalty, 0)
//
// as verl's DAPO reward manager adds it to the task's reward. It is 0 when
// OverlongPenalty is 0, and an error when the buffer is not in [1, maxLen].
func (s Settings) OverlongReward(length, maxLen int) (float64, error) {
	if s.OverlongPenalty == 0 {
		return 0, nil
	}
	if s.OverlongBuffer < 1 || s.OverlongBuffer > maxLen {
		return 0, fmt.Errorf("hacpo: method %q: overlong_buffer must be in [1, max_new_tokens = %d], got %d", s.Method, maxLen, s.OverlongBuffer)
	}
	if length < 0 {
		return 0, fmt.Errorf("hacpo: overlong reward: length %d < 0", length)
	}
	exceed := length - (maxLen - s.OverlongBuffer)
	return min(-float64(exceed)/float64(s.OverlongBuffer)*s.OverlongPenalty, 0), nil
}

// KeepsPrompt is dynamic sampling's filter (decision 28): whether a prompt's
// responses, with their task rewards before any shaping, can teach a learner
// anything. A method that shares rollouts keeps the prompt when the joint
// group's rewards are not all equal (else every learner's advantages are 0,
// decision 5); a method that does not keeps it when some agent's own rewards
// are not all equal. A group of one response is kept, as verl keeps it.
func (s Settings) KeepsPrompt(group []Response) bool {
	if len(group) <= 1 {
		return true
	}
	if s.SharesRollouts {
		for _, r := range group[1:] {
			if r.Reward != group[0].Reward {
				return true
			}
		}
		return false
	}
	first := map[int]float64{}
	count := map[int]int{}
	for _, r := range group {
		f, seen := first[r.Source]
		if !seen {
			first[r.Source] = r.Reward
		} else if r.Reward != f {
			return true
		}
		count[r.Source]++
	}
	for _, n := range count {
		if n == 1 {
			return true // an agent's single response: verl keeps such a group
		}
	}
	return false
}

// RolloutWeights is the rollout correction of one response (decision 33):
// old are its per-token log-probs under the trainer's old policy, sampler
// those its sampler gave (the same tokens). With the token level it returns
// one weight per token, min(exp(old_t − sampler_t), cap); with the sequence
// and geometric levels one weight, min(exp(Σ_t (old_t − sampler_t)), cap) or
// with the mean in place of the sum. Every log-ratio is clamped to ±20 first,
// as verl does. With the correction off it returns nil.
func (s Settings) RolloutWeights(old, sampler []float32) ([]float64, error) {
	if !s.correctsRollouts() {
		return nil, nil
	}
	if len(old) != len(sampler) || len(old) == 0 {
		return nil, fmt.Errorf("hacpo: rollout correction: %d old log-probs and %d sampler log-probs", len(old), len(sampler))
	}
	w := func(lr float64) float64 { return math.Min(math.Exp(math.Max(-20, math.Min(20, lr))), s.RolloutISCap) }
	if s.RolloutIS == ISToken {
		out := make([]float64, len(old))
		for t := range old {
			out[t] = w(float64(old[t]) - float64(sampler[t]))
			if math.IsNaN(out[t]) {
				return nil, fmt.Errorf("hacpo: rollout correction: token %d: log-probs %v and %v", t, old[t], sampler[t])
			}
		}
		return out, nil
	}
	sum := 0.0
	for t := range old {
		sum += float64(old[t]) - float64(sampler[t])
	}
	if math.IsNaN(sum) || math.IsInf(sum, 0) {
		return nil, fmt.Errorf("hacpo: rollout correction: the log-probs hold a non-finite value")
	}
	if s.RolloutIS == ISGeometric {
		sum /= float64(len(old))
	}
	return []float64{w(sum)}, nil
}
