package hacpo

import (
	"math/rand/v2"
	"testing"
)

// stepFixture is one HACPO step's algorithm inputs at the brief's benchmark size:
// 3 agents × 128 prompts × 8 responses of 64 tokens, mini-batch 512 sequences.
type stepFixture struct {
	s       Settings
	tr      *CapabilityTracker
	groups  [][]Response // per prompt, 24 responses (agent-major)
	lps     [][]float32  // per pool sequence (agent-major, prompt-major, response)
	old     []float64    // source's old mean log-prob per pool sequence
	oldTok  [][]float32
	ref     [][]float32
	counts  []int
	adv     [][][]float64 // [learner][prompt][i]
	samples [][]Sample    // per learner, in plan order
	seqs    [][][]float32
	grads   [][][]float32
	plans   []Plan
}

const (
	benchAgents  = 3
	benchPrompts = 128
	benchG       = 8
	benchT       = 64
	benchMB      = 512
)

func newStepFixture(b testing.TB) *stepFixture {
	rng := rand.New(rand.NewPCG(42, 42))
	f := &stepFixture{s: MustPreset("hacpo")}
	var err error
	f.tr, err = NewCapabilityTracker(benchAgents, f.s.Capability)
	if err != nil {
		b.Fatal(err)
	}
	pool := benchAgents * benchPrompts * benchG
	f.lps = make([][]float32, pool)
	f.old = make([]float64, pool)
	f.oldTok = make([][]float32, pool)
	f.ref = make([][]float32, pool)
	f.groups = make([][]Response, benchPrompts)
	rewards := make([][]float64, benchAgents)
	for p := range f.groups {
		f.groups[p] = make([]Response, 0, benchAgents*benchG)
	}
	for a := 0; a < benchAgents; a++ {
		for p := 0; p < benchPrompts; p++ {
			for i := 0; i < benchG; i++ {
				r := 0.0
				if rng.Float64() < 0.3+0.2*float64(a) {
					r = 1
				}
				f.groups[p] = append(f.groups[p], Response{Source: a, Reward: r})
				rewards[a] = append(rewards[a], r)
				k := (a*benchPrompts+p)*benchG + i
				lp := make([]float32, benchT)
				ot := make([]float32, benchT)
				rf := make([]float32, benchT)
				for t := range lp {
					lp[t] = float32(-2 * rng.Float64())
					ot[t] = lp[t] + float32(1e-4*rng.NormFloat64())
					rf[t] = lp[t] + float32(0.1*rng.NormFloat64())
				}
				f.lps[k], f.oldTok[k], f.ref[k] = lp, ot, rf
				f.old[k] = MeanLogProb(ot) - 0.1*rng.Float64()
			}
		}
	}
	if err := f.tr.Update(rewards); err != nil {
		b.Fatal(err)
	}
	f.counts = []int{benchPrompts * benchG, benchPrompts * benchG, benchPrompts * benchG}
	f.adv = make([][][]float64, benchAgents)
	f.samples = make([][]Sample, benchAgents)
	f.seqs = make([][][]float32, benchAgents)
	f.grads = make([][][]float32, benchAgents)
	f.plans = make([]Plan, benchAgents)
	for k := 0; k < benchAgents; k++ {
		f.adv[k], err = f.s.BatchAdvantages(k, f.groups, f.tr.Omega)
		if err != nil {
			b.Fatal(err)
		}
		f.plans[k], err = f.s.PlanMiniBatches(k, f.counts, benchMB)
		if err != nil {
			b.Fatal(err)
		}
		for _, ref := range f.plans[k].Order {
			p, i := ref.Index/benchG, ref.Index%benchG
			idx := (ref.Source*benchPrompts+p)*benchG + i
			sm := Sample{Self: ref.Source == k, Source: ref.Source, Advantage: f.adv[k][p][ref.Source*benchG+i], OldMeanLogProb: f.old[idx]}
			if sm.Self {
				sm.OldMeanLogProb = MeanLogProb(f.oldTok[idx])
				sm.RefLogProbs = f.ref[idx]
			} else {
				sm.Omega = f.tr.Omega(ref.Source, k)
			}
			f.samples[k] = append(f.samples[k], sm)
			f.seqs[k] = append(f.seqs[k], f.lps[idx])
			f.grads[k] = append(f.grads[k], make([]float32, benchT))
		}
	}
	return f
}

// learnerStep runs every mini-batch of learner k's step.
func (f *stepFixture) learnerStep(b testing.TB, k int) {
	for _, mb := range f.plans[k].MiniBatches {
		if _, err := f.s.MiniBatchLossInto(mb.M, f.samples[k][mb.Start:mb.End], f.seqs[k][mb.Start:mb.End], f.grads[k][mb.Start:mb.End]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAdvantages: all three learners' advantages over 128 prompt groups of 24.
func BenchmarkAdvantages(b *testing.B) {
	f := newStepFixture(b)
	b.ResetTimer()
	defer reportCPU(b)()
	for b.Loop() {
		for k := 0; k < benchAgents; k++ {
			for p, g := range f.groups {
				if _, err := f.s.GroupAdvantages(k, g, f.tr.Omega, f.adv[k][p]); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
}

// BenchmarkLossOneLearner: one learner's whole step of loss terms and per-token
// gradients: 3072 sequences × 64 tokens in 6 mini-batches (1024 self with KL).
func BenchmarkLossOneLearner(b *testing.B) {
	f := newStepFixture(b)
	b.ResetTimer()
	defer reportCPU(b)()
	for b.Loop() {
		f.learnerStep(b, 0)
	}
}

// BenchmarkStepAllLearners: the whole algorithm side of a 3-agent step: capability
// update, advantages, plans and every mini-batch loss of all three learners.
func BenchmarkStepAllLearners(b *testing.B) {
	f := newStepFixture(b)
	rewards := make([][]float64, benchAgents)
	for _, g := range f.groups {
		for _, r := range g {
			rewards[r.Source] = append(rewards[r.Source], r.Reward)
		}
	}
	b.ResetTimer()
	defer reportCPU(b)()
	for b.Loop() {
		if err := f.tr.Update(rewards); err != nil {
			b.Fatal(err)
		}
		for k := 0; k < benchAgents; k++ {
			for p, g := range f.groups {
				if _, err := f.s.GroupAdvantages(k, g, f.tr.Omega, f.adv[k][p]); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := f.s.PlanMiniBatches(k, f.counts, benchMB); err != nil {
				b.Fatal(err)
			}
			f.learnerStep(b, k)
		}
	}
}

// BenchmarkMiniBatchLoss512: one mini-batch of 512 self sequences × 64 tokens with KL
// (the unit the engine calls per optimizer step), allocating the gradient.
func BenchmarkMiniBatchLoss512(b *testing.B) {
	f := newStepFixture(b)
	samples, seqs := f.samples[0][:benchMB], f.seqs[0][:benchMB]
	b.ResetTimer()
	defer reportCPU(b)()
	for b.Loop() {
		if _, _, err := f.s.MiniBatchLoss(0, samples, seqs); err != nil {
			b.Fatal(err)
		}
	}
}
