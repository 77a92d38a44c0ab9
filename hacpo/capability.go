package hacpo

import (
	"fmt"
	"math"
)

// CapabilityState is the whole state of a CapabilityTracker: a plain value that
// round-trips bit-exactly through encoding/json (Go writes each float64 in the
// shortest form that parses back to the same bits) and through any other faithful
// encoding. Save it in checkpoints; restore it with RestoreCapabilityTracker.
type CapabilityState struct {
	Settings CapabilitySettings `json:"settings"`
	// Agents is the number of agents n.
	Agents int `json:"agents"`
	// Steps counts Update calls (training steps observed so far).
	Steps int `json:"steps"`
	// History[a] holds agent a's per-step values, oldest first, each already floored;
	// at most Settings.Window of them (the window, current step included).
	History [][]float64 `json:"history"`
}

// Validate checks the state's internal consistency.
func (st CapabilityState) Validate() error {
	if err := st.Settings.Validate(); err != nil {
		return err
	}
	if st.Agents < 1 {
		return fmt.Errorf("capability state: agents must be >= 1, got %d", st.Agents)
	}
	if st.Steps < 0 {
		return fmt.Errorf("capability state: steps must be >= 0, got %d", st.Steps)
	}
	if len(st.History) != st.Agents {
		return fmt.Errorf("capability state: history has %d agents, want %d", len(st.History), st.Agents)
	}
	for a, h := range st.History {
		if len(h) > st.Settings.Window {
			return fmt.Errorf("capability state: agent %d has %d values, more than the window %d", a, len(h), st.Settings.Window)
		}
		if len(h) > st.Steps {
			return fmt.Errorf("capability state: agent %d has %d values after %d steps", a, len(h), st.Steps)
		}
		for i, v := range h {
			if !finite(v) || v < st.Settings.Floor {
				return fmt.Errorf("capability state: agent %d value %d = %v is not finite and >= the floor %v", a, i, v, st.Settings.Floor)
			}
		}
	}
	return nil
}

// CapabilityTracker estimates each agent's capability P̂ (Eq 9) and the clamped
// capability ratio ω (Eq 8). Not safe for concurrent use; a training loop updates it
// once per step, before computing advantages (spec §7 item 14).
type CapabilityTracker struct {
	st   CapabilityState
	caps []float64 // P̂ per agent, recomputed whenever st changes
}

func makeTracker(st CapabilityState) *CapabilityTracker {
	t := &CapabilityTracker{st: st, caps: make([]float64, st.Agents)}
	t.refresh()
	return t
}

// refresh recomputes the cached capabilities from the history.
func (t *CapabilityTracker) refresh() {
	for a, h := range t.st.History {
		if len(h) == 0 {
			t.caps[a] = 1.0
			continue
		}
		sum := 0.0
		for _, v := range h {
			sum += v
		}
		t.caps[a] = math.Max(sum/float64(len(h)), t.st.Settings.Floor)
	}
}

// NewCapabilityTracker returns a tracker for n agents with no history: every
// capability is 1.0 and every ω is 1.
func NewCapabilityTracker(agents int, cs CapabilitySettings) (*CapabilityTracker, error) {
	st := CapabilityState{Settings: cs, Agents: agents, History: make([][]float64, max(agents, 0))}
	for a := range st.History {
		st.History[a] = []float64{}
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("hacpo: %w", err)
	}
	return makeTracker(st), nil
}

// RestoreCapabilityTracker rebuilds a tracker from a saved state, after checking it.
func RestoreCapabilityTracker(st CapabilityState) (*CapabilityTracker, error) {
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("hacpo: %w", err)
	}
	return makeTracker(st.clone()), nil
}

func (st CapabilityState) clone() CapabilityState {
	c := st
	c.History = make([][]float64, len(st.History))
	for a, h := range st.History {
		c.History[a] = append([]float64{}, h...)
	}
	return c
}

// State returns a deep copy of the tracker's state.
func (t *CapabilityTracker) State() CapabilityState { return t.st.clone() }

// Agents is the number of agents.
func (t *CapabilityTracker) Agents() int { return t.st.Agents }

// Steps is the number of Update calls so far.
func (t *CapabilityTracker) Steps() int { return t.st.Steps }

// StepValue is one agent's per-step capability statistic over all of its rewards
// in the step: the fraction of rewards > c.Success (PositiveRate) or their mean
// less c.RewardMin (MeanReward), floored at c.Floor. It is an error to pass no
// rewards.
func (c CapabilitySettings) StepValue(rewards []float64) (float64, error) {
	if len(rewards) == 0 {
		return 0, fmt.Errorf("no rewards")
	}
	var v float64
	switch c.Metric {
	case PositiveRate:
		n := 0
		for _, r := range rewards {
			if !finite(r) {
				return 0, fmt.Errorf("reward %v is not finite", r)
			}
			if r > c.Success {
				n++
			}
		}
		v = float64(n) / float64(len(rewards))
	case MeanReward:
		sum := 0.0
		for _, r := range rewards {
			if !finite(r) {
				return 0, fmt.Errorf("reward %v is not finite", r)
			}
			sum += r - c.RewardMin
		}
		v = sum / float64(len(rewards))
	default:
		return 0, fmt.Errorf("unknown capability metric %q", c.Metric)
	}
	return math.Max(v, c.Floor), nil
}

// Update records one training step: rewards[a] holds every reward agent a earned in
// the step (all prompts × all its responses, spec §7 item 1). Each agent must have
// at least one reward. On error the tracker is unchanged.
func (t *CapabilityTracker) Update(rewards [][]float64) error {
	if len(rewards) != t.st.Agents {
		return fmt.Errorf("hacpo: capability update has rewards for %d agents, want %d", len(rewards), t.st.Agents)
	}
	vals := make([]float64, t.st.Agents)
	for a, rs := range rewards {
		v, err := t.st.Settings.StepValue(rs)
		if err != nil {
			return fmt.Errorf("hacpo: capability update, agent %d: %w", a, err)
		}
		vals[a] = v
	}
	for a, v := range vals {
		h := append(t.st.History[a], v)
		if len(h) > t.st.Settings.Window {
			h = append(h[:0:0], h[len(h)-t.st.Settings.Window:]...)
		}
		t.st.History[a] = h
	}
	t.st.Steps++
	t.refresh()
	return nil
}

// UpdateResponses is Update with the step's responses given as one list; each
// response's Source must be in [0, Agents).
func (t *CapabilityTracker) UpdateResponses(rs []Response) error {
	per := make([][]float64, t.st.Agents)
	for i, r := range rs {
		if r.Source < 0 || r.Source >= t.st.Agents {
			return fmt.Errorf("hacpo: capability update: response %d has source %d, want [0, %d)", i, r.Source, t.st.Agents)
		}
		per[r.Source] = append(per[r.Source], r.Reward)
	}
	return t.Update(per)
}

// Capability is P̂ of agent a: the mean of its window, floored; 1.0 with no history.
// It returns NaN for an index out of range.
func (t *CapabilityTracker) Capability(a int) float64 {
	if a < 0 || a >= t.st.Agents {
		return math.NaN()
	}
	return t.caps[a]
}

// Capabilities returns P̂ of every agent.
func (t *CapabilityTracker) Capabilities() []float64 {
	c := make([]float64, t.st.Agents)
	for a := range c {
		c[a] = t.Capability(a)
	}
	return c
}

// Omega is ω(a, b) = clamp(P̂a / P̂b, RatioMin, RatioMax) (Eq 8 with the codebases'
// clamp), or exactly 1 while Steps <= WarmupSteps (the first WarmupSteps training
// steps, counting the current one) and for a == b. The baseline of learner k uses
// ω(k, j); the update multiplies a cross sample from j by ω(j, k). It returns NaN
// for an index out of range, which Advantages and MiniBatchLoss reject.
func (t *CapabilityTracker) Omega(a, b int) float64 {
	if a < 0 || a >= t.st.Agents || b < 0 || b >= t.st.Agents {
		return math.NaN()
	}
	if a == b || t.st.Steps <= t.st.Settings.WarmupSteps {
		return 1.0
	}
	r := t.caps[a] / t.caps[b]
	return math.Min(math.Max(r, t.st.Settings.RatioMin), t.st.Settings.RatioMax)
}

// OmegaMatrix is a fixed table of ω values, w[a][b] = ω(a, b): handy for tests and
// for carrying one step's ratios to another process. Its Omega method is an OmegaFunc.
type OmegaMatrix [][]float64

// Omega returns w[a][b], or NaN when out of range.
func (w OmegaMatrix) Omega(a, b int) float64 {
	if a < 0 || a >= len(w) || b < 0 || b >= len(w[a]) {
		return math.NaN()
	}
	return w[a][b]
}

// Matrix snapshots ω(a, b) for all pairs.
func (t *CapabilityTracker) Matrix() OmegaMatrix {
	w := make(OmegaMatrix, t.st.Agents)
	for a := range w {
		w[a] = make([]float64, t.st.Agents)
		for b := range w[a] {
			w[a][b] = t.Omega(a, b)
		}
	}
	return w
}
