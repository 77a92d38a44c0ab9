package hacpo

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// RolloutWeights by hand: old − sampler log-ratios 0.1, −0.3 and 1.2 with
// the cap 2.
func TestRolloutWeightsByHand(t *testing.T) {
	old := []float32{-1.0, -2.0, -0.5}
	smp := []float32{-1.1, -1.7, -1.7}
	lr := []float64{float64(old[0]) - float64(smp[0]), float64(old[1]) - float64(smp[1]), float64(old[2]) - float64(smp[2])}
	s := MustPreset("grpo")
	s.RolloutISCap = 2
	for _, c := range []struct {
		level ISLevel
		want  []float64
	}{
		{ISToken, []float64{math.Exp(lr[0]), math.Exp(lr[1]), 2}}, // e^1.2 ≈ 3.32 is capped
		{ISSequence, []float64{math.Exp(lr[0] + lr[1] + lr[2])}},  // e^1.0 ≈ 2.72, capped at 2
		{ISGeometric, []float64{math.Exp((lr[0] + lr[1] + lr[2]) / 3)}},
	} {
		s.RolloutIS = c.level
		for i := range c.want {
			c.want[i] = math.Min(c.want[i], 2)
		}
		got, err := s.RolloutWeights(old, smp)
		if err != nil || len(got) != len(c.want) {
			t.Fatalf("%s: %v %v", c.level, got, err)
		}
		for i := range got {
			if !near(got[i], c.want[i], 1e-12) {
				t.Errorf("%s weight %d = %v, want %v", c.level, i, got[i], c.want[i])
			}
		}
	}
	s.RolloutIS = ISOff
	if w, err := s.RolloutWeights(old, smp); w != nil || err != nil {
		t.Errorf("off: %v %v", w, err)
	}
	s.RolloutIS = ISToken
	if _, err := s.RolloutWeights(old, smp[:2]); err == nil {
		t.Error("mismatched lengths accepted")
	}
	// Far-apart log-probs clamp the log-ratio at ±20 before the cap.
	s.RolloutIS, s.RolloutISCap = ISSequence, 1e12
	if w, _ := s.RolloutWeights([]float32{0, 0}, []float32{-30, -30}); w[0] != math.Exp(20) {
		t.Errorf("clamp: %v", w)
	}
}

// A weight multiplies the sample's policy term and its gradient, not its
// KL; per-token weights weigh each token's share.
func TestRolloutWeightsInTheLoss(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct {
		s     Settings
		token bool // per-token weights
	}{
		{MustPreset("grpo"), true},
		{MustPreset("grpo"), false},
		{MustPreset("gspo"), true},
		{MustPreset("gspo"), false},
	} {
		s := c.s
		s.KLCoef = 0.05
		samples, lps := randomBatch(rng, 1, 0, 9, s.RatioLevel == TokenLevel)
		n := len(lps[0])
		w := []float64{0.5 + rng.Float64()}
		if c.token {
			w = make([]float64, n)
			for i := range w {
				w[i] = 0.5 + rng.Float64()
			}
		}
		grad := func(sm Sample, kl float64) (Loss, []float64) {
			s2 := s
			s2.KLCoef = kl
			g := [][]float64{make([]float64, n)}
			l, err := s2.MiniBatchLoss64(0, []Sample{sm}, lps, g)
			if err != nil {
				t.Fatal(err)
			}
			return l, g[0]
		}
		plain, gp := grpoTokenGrads(t, s, samples[0], lps[0])
		weighted := samples[0]
		weighted.ISWeights = w
		lw, gw := grad(weighted, 0)
		_, gkl := grad(weighted, s.KLCoef)
		_, gklPlain := grad(samples[0], s.KLCoef)
		_, g0 := grad(samples[0], 0)
		for tk := range gw {
			wt := w[0]
			if c.token {
				wt = w[tk]
			}
			if !near(gw[tk], gp[tk]*wt, 1e-12) {
				t.Fatalf("%s token %d: weighted gradient %v, want %v × %v", s.Method, tk, gw[tk], gp[tk], wt)
			}
			// The KL's share is the same with or without the weight.
			if !near(gkl[tk]-gw[tk], gklPlain[tk]-g0[tk], 1e-12) {
				t.Fatalf("%s token %d: the KL's gradient changed with the weight", s.Method, tk)
			}
		}
		mean := 0.0
		for _, v := range w {
			mean += v
		}
		mean /= float64(len(w))
		if s.RatioLevel == SequenceLevel && !near(lw.Policy, plain*mean, 1e-12) {
			t.Errorf("%s: weighted policy %v, want %v × %v", s.Method, lw.Policy, plain, mean)
		}
		if lw.Stats.ISUnits != len(w) {
			t.Errorf("%s: %d weighted units, want %d", s.Method, lw.Stats.ISUnits, len(w))
		}
	}
	// Bad weights are errors naming the sample.
	s := MustPreset("gspo")
	samples, lps := randomBatch(rng, 2, 0, 5, false)
	samples[1].ISWeights = []float64{1, 1, 1, 1, 1, 1, 1}
	if len(lps[1]) == 7 {
		samples[1].ISWeights = samples[1].ISWeights[:6]
	}
	if _, _, err := s.MiniBatchLoss(0, samples, f32(lps)); err == nil || !strings.Contains(err.Error(), "sample 1") {
		t.Errorf("wrong weight count: %v", err)
	}
	samples[1].ISWeights = []float64{math.NaN()}
	if _, _, err := s.MiniBatchLoss(0, samples, f32(lps)); err == nil || !strings.Contains(err.Error(), "rollout-correction weight") {
		t.Errorf("NaN weight: %v", err)
	}
	h := MustPreset("hacpo")
	h.RolloutIS = ISToken
	if err := h.Validate(); err == nil || !strings.Contains(err.Error(), "rollout_is") {
		t.Errorf("token-level correction with shared rollouts: %v", err)
	}
}

// grpoTokenGrads is the unweighted policy value and gradient of one sample
// with the KL off.
func grpoTokenGrads(t *testing.T, s Settings, sm Sample, lp []float64) (float64, []float64) {
	t.Helper()
	s.KLCoef = 0
	g := [][]float64{make([]float64, len(lp))}
	l, err := s.MiniBatchLoss64(0, []Sample{sm}, [][]float64{lp}, g)
	if err != nil {
		t.Fatal(err)
	}
	return l.Policy, g[0]
}

func f32(x [][]float64) [][]float32 {
	out := make([][]float32, len(x))
	for i, r := range x {
		out[i] = make([]float32, len(r))
		for j, v := range r {
			out[i][j] = float32(v)
		}
	}
	return out
}
