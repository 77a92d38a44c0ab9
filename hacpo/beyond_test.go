package hacpo

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// The variants beyond the paper (decisions 35, 36), by hand.
func TestCrossVariantsGolden(t *testing.T) {
	capable := with("hacpo", func(s *Settings) { s.CrossNegativeCapable = true })
	r := math.Exp(-0.1)
	// A < 0 from a less capable source (ω < 1): nothing; from an equal or
	// more capable one: HACPO's term; A > 0 always.
	checkTerm(t, "capable, A<0, ω 0.5", capable.CrossTerm(0, -1.1, -1.0, -0.5, 0.5), r, 0, 0, Inside)
	checkTerm(t, "capable, A<0, ω 1", capable.CrossTerm(0, -1.1, -1.0, -0.5, 1), r, r*r*0.5, r*r*0.5, Inside)
	checkTerm(t, "capable, A<0, ω 2", capable.CrossTerm(0, -1.1, -1.0, -0.5, 2), r, r*r*2*0.5, r*r*2*0.5, Inside)
	checkTerm(t, "capable, A>0, ω 0.5", capable.CrossTerm(0, -1.1, -1.0, 0.5, 0.5), r, -r*r*0.5*0.5, -r*r*0.5*0.5, Inside)

	adaptive := with("hacpo", func(s *Settings) { s.CrossBounds = AdaptiveBounds })
	at := func(m int, mean, src, adv, omega, anchor float64) Term {
		return adaptive.CrossSampleTerm(m, Sample{OldMeanLogProb: src, Advantage: adv, Omega: omega, CrossAnchor: anchor}, mean)
	}
	// Anchor 0.1: the bound at m = 0 is 0.8 × 0.1 = 0.08.
	s1 := math.Exp(-2.5) // 0.0821: inside
	checkTerm(t, "adaptive inside", at(0, -3.5, -1.0, 0.5, 2, 0.1), s1, -s1*s1*2*0.5, -s1*s1*2*0.5, Inside)
	s2 := math.Exp(-3.0) // 0.0498: below 0.08, clamped there
	checkTerm(t, "adaptive below", at(0, -4.0, -1.0, 0.5, 2, 0.1), s2, -0.08*0.08*2*0.5, 0, Below)
	// Stepwise: m = 4 gives L = 0.9, so 0.09 with the anchor; 0.0821 is now below.
	checkTerm(t, "adaptive stepwise", at(4, -3.5, -1.0, 0.5, 2, 0.1), s1, -0.09*0.09*2*0.5, 0, Below)
	// An anchor above 1 counts as 1: the paper's bound 0.8.
	checkTerm(t, "adaptive anchor 2", at(0, -3.5, -1.0, 0.5, 2, 2), s1, -0.8*0.8*2*0.5, 0, Below)
	// Above 1 stays clamped at 1.
	checkTerm(t, "adaptive above", at(0, -0.9, -1.0, -0.5, 2, 0.1), math.Exp(0.1), 1*2*0.5, 0, Above)

	dec := with("hacpo", func(s *Settings) { s.CrossBounds = DecoupledBounds })
	dt := func(mean, start, src, adv, omega float64) Term {
		return dec.CrossSampleTerm(3, Sample{OldMeanLogProb: src, LearnerStartMeanLogProb: start, Advantage: adv, Omega: omega}, mean)
	}
	w := 2 * math.Exp(-2.0) // ω × min(1, s_start)^α with s_start = e^−2, α = 1
	rho := math.Exp(1e-4)   // inside [1 − 3e-4, 1 + 4e-4]
	checkTerm(t, "decoupled inside", dt(-3+1e-4, -3, -1, 0.5, 2), math.Exp(-2+1e-4), -w*rho*0.5, -w*rho*0.5, Inside)
	// ρ = e^1e-3 above 1 + 4e-4: clipped for A > 0, not for A < 0 (PPO's min).
	rho = math.Exp(1e-3)
	checkTerm(t, "decoupled above A>0", dt(-3+1e-3, -3, -1, 0.5, 2), math.Exp(-2+1e-3), -w*(1+4e-4)*0.5, 0, Above)
	checkTerm(t, "decoupled above A<0", dt(-3+1e-3, -3, -1, -0.5, 2), math.Exp(-2+1e-3), w*rho*0.5, w*rho*0.5, Above)
	// ρ below 1 − 3e-4 with A < 0: clipped.
	checkTerm(t, "decoupled below A<0", dt(-3-1e-3, -3, -1, -0.5, 2), math.Exp(-2-1e-3), w*(1-3e-4)*0.5, 0, Below)
	// A start above the source: the importance weight is truncated at 1.
	checkTerm(t, "decoupled truncated", dt(-0.5, -0.5, -1, 0.5, 2), math.Exp(0.5), -2*0.5, -2*0.5, Inside)
	// α = 3 raises the start ratio to the third power; no ω.
	dec3 := dec
	dec3.Alpha, dec3.OmegaInUpdate = 3, false
	w3 := math.Exp(-6.0)
	checkTerm(t, "decoupled α 3", dec3.CrossSampleTerm(0, Sample{OldMeanLogProb: -1, LearnerStartMeanLogProb: -3, Advantage: 0.5, Omega: 2}, -3),
		math.Exp(-2), -w3*0.5, -w3*0.5, Inside)
}

// The variants reduce to HACPO where they should, bit for bit: the capable
// rule when every source is at least as capable, adaptive bounds with
// anchors ≥ 1; and each of them differs from it somewhere.
func TestCrossVariantsReduceToHACPO(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 36))
	base := MustPreset("hacpo")
	capable := with("hacpo", func(s *Settings) { s.CrossNegativeCapable = true })
	adaptive := with("hacpo", func(s *Settings) { s.CrossBounds = AdaptiveBounds })
	differs := map[string]bool{}
	for trial := 0; trial < 50; trial++ {
		samples, lps := randomBatch(rng, 4, 12, 10, false)
		m := rng.IntN(5)
		want, gw, err := base.MiniBatchLoss(m, samples, toF32(lps))
		if err != nil {
			t.Fatal(err)
		}
		same := slices.Clone(samples)
		for b := range same {
			same[b].Omega = 1 + 9*rng.Float64()
			same[b].CrossAnchor = 1 + rng.Float64()
		}
		w2, g2, _ := base.MiniBatchLoss(m, same, toF32(lps))
		for name, s := range map[string]Settings{"capable": capable, "adaptive": adaptive} {
			got, gg, err := s.MiniBatchLoss(m, same, toF32(lps))
			if err != nil {
				t.Fatal(err)
			}
			if got.Total != w2.Total || !equalRows(gg, g2) {
				t.Fatalf("%s differs from HACPO where it should reduce to it: %v vs %v", name, got.Total, w2.Total)
			}
		}
		// With ω < 1 and anchors < 1 present they change the loss.
		for b := range samples {
			samples[b].CrossAnchor = 0.05 + 0.9*rng.Float64()
		}
		for name, s := range map[string]Settings{"capable": capable, "adaptive": adaptive} {
			got, gg, err := s.MiniBatchLoss(m, samples, toF32(lps))
			if err != nil {
				t.Fatal(err)
			}
			if got.Total != want.Total || !equalRows(gg, gw) {
				differs[name] = true
			}
		}
	}
	for _, name := range []string{"capable", "adaptive"} {
		if !differs[name] {
			t.Errorf("%s never changed the loss", name)
		}
	}
}

func toF32(x [][]float64) [][]float32 {
	out := make([][]float32, len(x))
	for b, row := range x {
		out[b] = make([]float32, len(row))
		for t, v := range row {
			out[b][t] = float32(v)
		}
	}
	return out
}

func equalRows(a, b [][]float32) bool {
	for i := range a {
		if !slices.Equal(a[i], b[i]) {
			return false
		}
	}
	return len(a) == len(b)
}

// Finite differences of MiniBatchLoss's Total under each variant, the
// detached α factor held fixed as in TestMiniBatchLossFiniteDifferences;
// cross ratios span both sides of every bound.
func TestCrossVariantsFiniteDifferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 38))
	for _, s := range []Settings{
		with("hacpo", func(s *Settings) { s.CrossNegativeCapable = true }),
		with("hacpo", func(s *Settings) { s.CrossBounds = AdaptiveBounds }),
		with("hacpo", func(s *Settings) { s.CrossBounds = DecoupledBounds }),
		with("hacpo", func(s *Settings) { s.CrossBounds = DecoupledBounds; s.Alpha = 2; s.LossAgg = TokenMean }),
		with("hacpo", func(s *Settings) {
			s.CrossBounds, s.CrossNegativeCapable, s.LossAgg = AdaptiveBounds, true, SeqMeanTokenSum
		}),
	} {
		s.KLCoef = 0.05
		checked, kinks, clipped := 0, 0, 0
		for trial := 0; trial < 12; trial++ {
			samples, lps := randomBatch(rng, 4, 10, 12, false)
			for b := range samples {
				if samples[b].Self {
					continue
				}
				mean := MeanLogProb(lps[b])
				// Ratios against the source from 0.03 to 1.3, anchors
				// around them, starts within ±1e-3 of the current mean.
				samples[b].OldMeanLogProb = mean - math.Log(0.03+1.27*rng.Float64())
				samples[b].CrossAnchor = 0.02 + 1.2*rng.Float64()
				samples[b].LearnerStartMeanLogProb = mean + (rng.Float64()*2-1)*1e-3
			}
			n, k, loss := checkFiniteDifferences(t, s, rng.IntN(4), samples, lps)
			checked, kinks = checked+n, kinks+k
			for _, sq := range loss.Seqs {
				if sq.Clip != Inside {
					clipped++
				}
			}
		}
		if kinks > checked/10 || clipped == 0 {
			t.Errorf("%s: %d coordinates at a kink, %d checked, %d clipped sequences", s.CrossBounds, kinks, checked, clipped)
		}
	}
}

// Under decoupled bounds the clip follows the learner's movement, not its
// distance from the source: a cross sample the learner finds 20 times less
// likely than its author keeps its gradient at the step's start, where
// HACPO's fixed bound clamps it to zero.
func TestDecoupledBoundsKeepDistantSamples(t *testing.T) {
	src, start := -1.0, -1.0-math.Log(20)
	sm := Sample{OldMeanLogProb: src, LearnerStartMeanLogProb: start, Advantage: 1, Omega: 1}
	fixed := MustPreset("hacpo").CrossSampleTerm(0, sm, start)
	dec := with("hacpo", func(s *Settings) { s.CrossBounds = DecoupledBounds }).CrossSampleTerm(0, sm, start)
	if fixed.Grad != 0 || fixed.Clip != Below {
		t.Fatalf("fixed bounds: %+v, want a clamped term", fixed)
	}
	if !near(dec.Grad, -1.0/20, 1e-12) || dec.Clip != Inside {
		t.Fatalf("decoupled: %+v, want gradient −ω·s_start·A = −0.05", dec)
	}
}

func TestCrossAnchor(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{nil, 1},
		{[]float64{0.3}, 0.3},
		{[]float64{0.5, 0.1, 0.2}, 0.2},
		{[]float64{0.4, 0.1, 0.2, 0.9}, 0.3},
		{[]float64{2, 3, 0.5}, 1},
	} {
		in := slices.Clone(c.in)
		got, err := CrossAnchor(in)
		if err != nil || !near(got, c.want, 1e-15) || !slices.Equal(in, c.in) {
			t.Errorf("CrossAnchor(%v) = %v, %v (input now %v), want %v", c.in, got, err, in, c.want)
		}
	}
	for _, bad := range [][]float64{{0.1, 0}, {math.NaN()}, {math.Inf(1)}, {-1}} {
		if _, err := CrossAnchor(bad); err == nil {
			t.Errorf("CrossAnchor(%v): no error", bad)
		}
	}
}

func TestCrossVariantsValidate(t *testing.T) {
	for _, c := range []struct {
		edit func(*Settings)
		base string
		want string
	}{
		{func(s *Settings) { s.CrossBounds = "wide" }, "hacpo", "cross_bounds must be"},
		{func(s *Settings) { s.CrossBounds = AdaptiveBounds }, "naive", "cross_rule"},
		{func(s *Settings) { s.CrossBounds = DecoupledBounds }, "gspo", "shares rollouts"},
		{func(s *Settings) { s.CrossBounds = AdaptiveBounds }, "no-cross-clip", "without cross_clip"},
		{func(s *Settings) { s.CrossNegativeCapable, s.CrossPositiveOnly = true, true }, "hacpo", "at once"},
		{func(s *Settings) { s.CrossNegativeCapable = true }, "gspo", "shares rollouts"},
	} {
		err := with(c.base, c.edit).Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.base, err, c.want)
		}
	}
	// Missing inputs are errors naming the sample.
	lp := [][]float32{{-1, -1}}
	for _, c := range []struct {
		s    Settings
		sm   Sample
		want string
	}{
		{with("hacpo", func(s *Settings) { s.CrossBounds = DecoupledBounds }), Sample{Source: 1, OldMeanLogProb: -1, Omega: 1, LearnerStartMeanLogProb: math.NaN()}, "start-of-step"},
		{with("hacpo", func(s *Settings) { s.CrossBounds = AdaptiveBounds }), Sample{Source: 1, OldMeanLogProb: -1, Omega: 1}, "anchor"},
		{with("no-omega", func(s *Settings) { s.CrossNegativeCapable = true }), Sample{Source: 1, OldMeanLogProb: -1}, "ω"},
	} {
		_, _, err := c.s.MiniBatchLoss(0, []Sample{c.sm}, lp)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "sample 0") {
			t.Errorf("%s: got %v, want an error containing %q", c.s.CrossBounds, err, c.want)
		}
	}
}
