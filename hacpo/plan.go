package hacpo

import (
	"fmt"
	"slices"
	"strings"
)

// SeqRef names one sequence of the step's pool: the Index-th response of agent
// Source, in the order the training loop stores that agent's responses.
type SeqRef struct {
	Source int `json:"source"`
	Index  int `json:"index"`
}

// MiniBatch is one update of a learner's step: the sequences Order[Start:End].
type MiniBatch struct {
	M          int     `json:"m"`           // update index within the step (drives L_m)
	Start      int     `json:"start"`       // first position in Plan.Order
	End        int     `json:"end"`         // one past the last position
	Self       int     `json:"self"`        // self sequences in it
	Cross      int     `json:"cross"`       // cross sequences in it
	CrossLower float64 `json:"cross_lower"` // L_m for its cross sequences (0 when it has none or no clamp applies)
}

// Len is the number of sequences in the mini-batch.
func (mb MiniBatch) Len() int { return mb.End - mb.Start }

// Plan is one learner's update schedule for one step: its sequences in training
// order cut into mini-batches of MiniBatchSize sequences, the last possibly
// smaller. Under the V1 semantics (PlanMiniBatches) the order is self first, then
// each other agent by increasing index, with no shuffle; under the original one
// (PlanBalanced) it is verl's balanced order, gathered mini-batch by mini-batch
// across Ranks data-parallel ranks.
type Plan struct {
	Learner       int         `json:"learner"`
	MiniBatchSize int         `json:"minibatch_size"`
	Ranks         int         `json:"ranks,omitempty"` // data-parallel ranks of a balanced plan; 0 for V1
	Order         []SeqRef    `json:"order"`
	MiniBatches   []MiniBatch `json:"minibatches"`
}

// Updates is the number of parameter updates (mini-batches) in the step.
func (p Plan) Updates() int { return len(p.MiniBatches) }

// Sequences is the number of sequences the learner trains on in the step.
func (p Plan) Sequences() int { return len(p.Order) }

// Refs returns the sequences of mini-batch m.
func (p Plan) Refs(m int) []SeqRef {
	mb := p.MiniBatches[m]
	return p.Order[mb.Start:mb.End]
}

// String prints the plan, one line per mini-batch, for the CLI.
func (p Plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "learner %d: %d sequences, %d updates of up to %d sequences", p.Learner, len(p.Order), len(p.MiniBatches), p.MiniBatchSize)
	if p.Ranks > 0 {
		fmt.Fprintf(&b, " (balanced over %d ranks)", p.Ranks)
	}
	b.WriteByte('\n')
	for _, mb := range p.MiniBatches {
		fmt.Fprintf(&b, "  m=%d: %d sequences (self %d, cross %d", mb.M, mb.Len(), mb.Self, mb.Cross)
		if mb.Cross > 0 && mb.CrossLower > 0 {
			fmt.Fprintf(&b, ", cross lower bound %.4g", mb.CrossLower)
		}
		b.WriteString("):")
		// Runs of consecutive indices of one source; a balanced plan has many,
		// so beyond maxRuns it gives the count per source instead.
		var runs [][2]SeqRef
		for i := mb.Start; i < mb.End; {
			j := i
			for j+1 < mb.End && p.Order[j+1].Source == p.Order[i].Source && p.Order[j+1].Index == p.Order[j].Index+1 {
				j++
			}
			runs = append(runs, [2]SeqRef{p.Order[i], p.Order[j]})
			i = j + 1
		}
		if len(runs) <= maxRuns {
			for _, r := range runs {
				fmt.Fprintf(&b, " agent%d[%d:%d]", r[0].Source, r[0].Index, r[1].Index+1)
			}
		} else {
			per := map[int]int{}
			var srcs []int
			for _, r := range p.Order[mb.Start:mb.End] {
				if per[r.Source] == 0 {
					srcs = append(srcs, r.Source)
				}
				per[r.Source]++
			}
			slices.Sort(srcs)
			for _, a := range srcs {
				fmt.Fprintf(&b, " agent%d×%d", a, per[a])
			}
			fmt.Fprintf(&b, " in %d runs", len(runs))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// maxRuns is the most runs of consecutive indices String lists for one mini-batch.
const maxRuns = 8

// PlanMiniBatches plans learner's updates for a step in which agent a produced
// counts[a] responses. Methods that do not share rollouts plan the learner's own
// responses only. miniBatchSize is in sequences (the paper: 64 prompts × G = 512);
// with it fixed, HACPO with n agents makes n times as many updates as GSPO, and
// GSPO×2 (2G responses) as many as 2-agent HACPO.
func (s Settings) PlanMiniBatches(learner int, counts []int, miniBatchSize int) (Plan, error) {
	p := Plan{Learner: learner, MiniBatchSize: miniBatchSize}
	if learner < 0 || learner >= len(counts) {
		return p, fmt.Errorf("hacpo: plan: learner %d out of range for %d agents", learner, len(counts))
	}
	if miniBatchSize < 1 {
		return p, fmt.Errorf("hacpo: plan: mini-batch size must be >= 1 sequence, got %d", miniBatchSize)
	}
	total := 0
	for a, c := range counts {
		if c < 0 {
			return p, fmt.Errorf("hacpo: plan: agent %d has %d responses", a, c)
		}
		if a == learner || s.SharesRollouts {
			total += c
		}
	}
	p.Order = make([]SeqRef, 0, total)
	add := func(a int) {
		for i := 0; i < counts[a]; i++ {
			p.Order = append(p.Order, SeqRef{Source: a, Index: i})
		}
	}
	add(learner)
	if s.SharesRollouts {
		for a := range counts {
			if a != learner {
				add(a)
			}
		}
	}
	clamps := s.SharesRollouts && s.CrossRule == CrossHACPO && s.CrossClip
	for start, m := 0, 0; start < total; start, m = start+miniBatchSize, m+1 {
		mb := MiniBatch{M: m, Start: start, End: min(start+miniBatchSize, total)}
		for _, r := range p.Order[mb.Start:mb.End] {
			if r.Source == learner {
				mb.Self++
			} else {
				mb.Cross++
			}
		}
		if mb.Cross > 0 && clamps {
			mb.CrossLower = s.CrossLower(m)
		}
		p.MiniBatches = append(p.MiniBatches, mb)
	}
	return p, nil
}
