package hacpo

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// lossRows allocates a gradient with the shape of lps.
func lossRows(lps [][]float64) [][]float64 {
	g := make([][]float64, len(lps))
	for b := range lps {
		g[b] = make([]float64, len(lps[b]))
	}
	return g
}

// Every loss aggregation by hand on three GRPO sequences with lp = old (ratio
// 1: each token's term is −A, its slope −A) and a k1 KL of exactly 1 per
// token (ref = lp − 1), KLCoef 0.1, EntropyCoef 0.2:
//
//	a: 1 token,  A = 1    token terms −1          sum −1    mean −1
//	b: 2 tokens, A = −1   token terms +1, +1      sum  2    mean  1
//	c: 3 tokens, A = 0.5  token terms −½, −½, −½  sum −1.5  mean −½
//
// A token's weight w is what one unit of its term adds to the loss:
//
//	seq-mean-token-mean      policy (−1 + 1 − ½)/3 = −1/6    KL 1         w = 1/(3·n_b): ⅓, ⅙, 1/9
//	token-mean               policy (−1 + 2 − 1.5)/6 = −1/12 KL 1         w = 1/6
//	seq-mean-token-sum       policy (−1 + 2 − 1.5)/3 = −1/6  KL 6/3 = 2   w = ⅓
//	seq-mean-token-sum-norm  policy −0.5/(3·4) = −1/24       KL 6/12 = ½  w = 1/12  (L = 4)
//
// and dLoss/dlp = (0.1 − A)·w (the policy's −A·w plus 0.1·w of the KL), the
// entropy weight −0.2·w.
func TestLossAggregationsByHand(t *testing.T) {
	lps := [][]float64{{-1}, {-0.5, -2}, {-1.5, -0.25, -3}}
	advs := []float64{1, -1, 0.5}
	samples := make([]Sample, 3)
	for b, lp := range lps {
		old, ref := make([]float32, len(lp)), make([]float32, len(lp))
		for t, x := range lp {
			old[t], ref[t] = float32(x), float32(x-1)
		}
		samples[b] = Sample{Self: true, Advantage: advs[b], OldLogProbs: old, RefLogProbs: ref}
	}
	for _, c := range []struct {
		agg        LossAgg
		policy, kl float64
		w          []float64 // per sequence
	}{
		{SeqMeanTokenMean, -1.0 / 6, 1, []float64{1.0 / 3, 1.0 / 6, 1.0 / 9}},
		{TokenMean, -1.0 / 12, 1, []float64{1.0 / 6, 1.0 / 6, 1.0 / 6}},
		{SeqMeanTokenSum, -1.0 / 6, 2, []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}},
		{SeqMeanTokenSumNorm, -1.0 / 24, 0.5, []float64{1.0 / 12, 1.0 / 12, 1.0 / 12}},
	} {
		s := MustPreset("grpo")
		s.LossAgg, s.LossAggTokens = c.agg, 4
		s.KLEstimator, s.KLCoef, s.EntropyCoef = KLK1, 0.1, 0.2
		grad := lossRows(lps)
		l, err := s.MiniBatchLoss64(0, samples, lps, grad)
		if err != nil {
			t.Fatalf("%s: %v", c.agg, err)
		}
		if !near(l.Policy, c.policy, 1e-15) || !near(l.KL, c.kl, 1e-15) || !near(l.Total, c.policy+0.1*c.kl, 1e-15) {
			t.Errorf("%s: policy %v KL %v total %v, want %v %v", c.agg, l.Policy, l.KL, l.Total, c.policy, c.kl)
		}
		for b := range grad {
			for tk := range grad[b] {
				if want := (0.1 - advs[b]) * c.w[b]; !near(grad[b][tk], want, 1e-15) {
					t.Errorf("%s: grad[%d][%d] = %v, want %v", c.agg, b, tk, grad[b][tk], want)
				}
				if want := -0.2 * c.w[b]; !near(float64(l.EntropyWeights[b][tk]), want, 1e-7) {
					t.Errorf("%s: entropy weight [%d][%d] = %v, want %v", c.agg, b, tk, l.EntropyWeights[b][tk], want)
				}
			}
		}
	}
	// seq-mean-token-sum-norm without its token count is an error naming the field.
	s := MustPreset("dr_grpo")
	if _, err := s.MiniBatchLoss64(0, samples, lps, lossRows(lps)); err == nil || !strings.Contains(err.Error(), "loss_agg_tokens") {
		t.Errorf("dr_grpo without loss_agg_tokens: %v", err)
	}
}

// A masked sample is in no count: the loss with it is the loss without it,
// bit for bit, and its gradient row (and entropy weights) are exactly zero,
// under every aggregation, for the token and sequence ratios and for HACPO's
// cross samples.
func TestMaskedSampleIsRemoved(t *testing.T) {
	rng := rand.New(rand.NewPCG(32, 2))
	for _, preset := range []string{"grpo", "gspo", "hacpo"} {
		for _, agg := range lossAggs {
			s := MustPreset(preset)
			s.LossAgg, s.LossAggTokens, s.EntropyCoef = agg, 12, 0.01
			nCross := 0
			if s.SharesRollouts {
				nCross = 4
			}
			samples, lps := randomBatch(rng, 4, nCross, 12, s.RatioLevel == TokenLevel)
			for _, masked := range []int{1, len(samples) - 1} {
				withMask := append([]Sample(nil), samples...)
				withMask[masked].Masked = true
				withMask[masked].Advantage = 1e3 // nothing of it may leak
				grad := lossRows(lps)
				for tk := range grad[masked] {
					grad[masked][tk] = 7 // overwritten with zeros
				}
				l, err := s.MiniBatchLoss64(1, withMask, lps, grad)
				if err != nil {
					t.Fatal(err)
				}
				rest := append(append([]Sample(nil), samples[:masked]...), samples[masked+1:]...)
				restLPs := append(append([][]float64(nil), lps[:masked]...), lps[masked+1:]...)
				restGrad := lossRows(restLPs)
				want, err := s.MiniBatchLoss64(1, rest, restLPs, restGrad)
				if err != nil {
					t.Fatal(err)
				}
				name := preset + "/" + string(agg)
				if l.Total != want.Total || l.Policy != want.Policy || l.KL != want.KL {
					t.Errorf("%s: masking sample %d gives %v, removing it %v", name, masked, l.Total, want.Total)
				}
				for tk, g := range grad[masked] {
					if g != 0 || l.EntropyWeights[masked][tk] != 0 {
						t.Errorf("%s: masked row has gradient %v, entropy weight %v", name, grad[masked], l.EntropyWeights[masked])
						break
					}
				}
				for b, r := range restGrad {
					gb := b
					if b >= masked {
						gb++
					}
					for tk := range r {
						if grad[gb][tk] != r[tk] || l.EntropyWeights[gb][tk] != want.EntropyWeights[b][tk] {
							t.Fatalf("%s: row %d differs with the masked sample in", name, gb)
						}
					}
				}
				st, ws := l.Stats, want.Stats
				ws.Sequences++
				ws.Masked++
				if st != ws || !l.Seqs[masked].Masked || l.Seqs[masked].Policy != 0 {
					t.Errorf("%s: stats %+v, want %+v; seq %+v", name, st, ws, l.Seqs[masked])
				}
			}
		}
	}
}

// CISPO keeps the gradient of every unit: outside the clip range it is −c·A
// (c the bound), where PPO's is 0. Token level: grpo's range [0.8, 1.28] and
// CISPO's preset range [0, 5]; sequence level: GSPO's [0.9997, 1.0004].
func TestCISPOGradientOutsideTheClip(t *testing.T) {
	grpo, cispo := MustPreset("grpo"), MustPreset("cispo")
	narrow := cispo
	narrow.SelfClipLow, narrow.SelfClipHigh = 0.2, 0.28
	gspo := MustPreset("gspo")
	seqCISPO := gspo
	seqCISPO.SelfRule = SelfCISPO
	e2, em1 := math.Exp(2), math.Exp(-1)
	for _, c := range []struct {
		name               string
		got                Term
		ratio, value, grad float64
		clip               Clip
	}{
		// r = e² ≈ 7.39 above both ranges, A = 1.
		{"ppo above A>0", grpo.TokenTerm(-1, -3, 1), e2, -1.28, 0, Above},
		{"cispo above A>0", cispo.TokenTerm(-1, -3, 1), e2, -5, -5, Above},
		{"cispo [0.8,1.28] above A>0", narrow.TokenTerm(-1, -3, 1), e2, -1.28, -1.28, Above},
		// r = e⁻¹ ≈ 0.368 below [0.8, 1.28], A = −1: PPO's min picks 0.8·A, constant.
		{"ppo below A<0", grpo.TokenTerm(-2, -1, -1), em1, 0.8, 0, Below},
		{"cispo below A<0", narrow.TokenTerm(-2, -1, -1), em1, 0.8, 0.8, Below},
		// Inside: both are −r·A with gradient −r·A.
		{"cispo inside", narrow.TokenTerm(-1, -1.1, 2), math.Exp(0.1), -2 * math.Exp(0.1), -2 * math.Exp(0.1), Inside},
		// Sequence level: s = e^0.001 > 1.0004, A = 2: PPO 0, CISPO −1.0004·2.
		{"gspo above", gspo.SelfTerm(-1, -1.001, 2), math.Exp(0.001), -1.0004 * 2, 0, Above},
		{"gspo cispo above", seqCISPO.SelfTerm(-1, -1.001, 2), math.Exp(0.001), -1.0004 * 2, -1.0004 * 2, Above},
		// The ±10 clamp of the log-ratio bounds the ratio, not CISPO's gradient: c = 5.
		{"cispo beyond the log clamp", cispo.TokenTerm(0, -15, 1), math.Exp(10), -5, -5, Above},
	} {
		checkTerm(t, c.name, c.got, c.ratio, c.value, c.grad, c.clip)
	}
}

// KLPenalty, by hand, with old = (−1, −2) and ref = (−1.5, −2.25), KLCoef 0.1:
// old − ref = (0.5, 0.25).
//
//	k1: 0.1·(0.5 + 0.25)                                     = 0.075
//	k2: 0.1·½(0.25 + 0.0625)                                 = 0.015625
//	k3: 0.1·[(e^−0.5 + 0.5 − 1) + (e^−0.25 + 0.25 − 1)]       ≈ 0.0135335
func TestKLPenaltyByHand(t *testing.T) {
	old, ref := []float32{-1, -2}, []float32{-1.5, -2.25}
	for _, c := range []struct {
		est  KLEstimator
		want float64
	}{
		{KLK1, 0.075},
		{KLK2, 0.015625},
		{KLK3, 0.1 * (math.Exp(-0.5) + math.Exp(-0.25) - 1.25)},
		{"", 0.1 * (math.Exp(-0.5) + math.Exp(-0.25) - 1.25)}, // "" is k3
	} {
		s := MustPreset("grpo")
		s.KLCoef, s.KLEstimator, s.KLInReward = 0.1, c.est, true
		if err := s.Validate(); err != nil {
			t.Fatal(err)
		}
		got, err := s.KLPenalty(old, ref)
		if err != nil || !near(got, c.want, 1e-15) {
			t.Errorf("%q: KLPenalty = %v, %v; want %v", c.est, got, err, c.want)
		}
	}
	s := MustPreset("grpo")
	if _, err := s.KLPenalty(old, ref[:1]); err == nil || !strings.Contains(err.Error(), "2 old log-probs and 1 reference") {
		t.Errorf("length mismatch: %v", err)
	}
	s.KLEstimator = KLK1
	if _, err := s.KLPenalty(old, []float32{float32(math.NaN()), 0}); err == nil || !strings.Contains(err.Error(), "non-finite") {
		t.Errorf("NaN: %v", err)
	}
}

// The baseline is anchored at RewardMin (decision 32). Rewards ±1 declared
// with SetRewards(−1, 1, 0) teach what the same outcomes as 0/1 teach under
// SetRewards(0, 1, 0): the capability (successes are rewards > 0 in both),
// ω and the baseline's case are equal, and the advantages equal up to ε's
// share (the ±1 std is twice the 0/1 one: 2x/(2σ + ε) against x/(σ + ε)).
func TestAnchoredBaselinePlusMinusOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(32, 3))
	pm := MustPreset("hacpo")
	pm.SetRewards(-1, 1, 0)
	if err := pm.Validate(); err != nil {
		t.Fatal(err)
	}
	zo := MustPreset("hacpo")
	cases := map[BaselineCase]int{}
	for trial := 0; trial < 200; trial++ {
		// Three agents, 4 responses each, with success rates of their own.
		var step01, stepPM [][]float64
		var g01, gPM []Response
		for a := 0; a < 3; a++ {
			p := rng.Float64()
			var r01, rPM []float64
			for i := 0; i < 4; i++ {
				r := 0.0
				if rng.Float64() < p {
					r = 1
				}
				r01, rPM = append(r01, r), append(rPM, 2*r-1)
				g01 = append(g01, Response{a, r})
				gPM = append(gPM, Response{a, 2*r - 1})
			}
			step01, stepPM = append(step01, r01), append(stepPM, rPM)
		}
		t01, tPM := newTracker(t, 3, zo.Capability), newTracker(t, 3, pm.Capability)
		update(t, t01, step01...)
		update(t, tPM, stepPM...)
		for k := 0; k < 3; k++ {
			a01, aPM := make([]float64, len(g01)), make([]float64, len(gPM))
			ga01, err := zo.GroupAdvantages(k, g01, t01.Omega, a01)
			if err != nil {
				t.Fatal(err)
			}
			gaPM, err := pm.GroupAdvantages(k, gPM, tPM.Omega, aPM)
			if err != nil {
				t.Fatal(err)
			}
			if ga01.Case != gaPM.Case || !near(gaPM.Baseline, 2*ga01.Baseline-1, 1e-12) {
				t.Fatalf("learner %d, rewards %v: baseline %v (%v) with ±1, %v (%v) with 0/1", k, gPM, gaPM.Baseline, gaPM.Case, ga01.Baseline, ga01.Case)
			}
			cases[ga01.Case]++
			for i := range a01 {
				if !near(aPM[i], a01[i], 2e-6) {
					t.Fatalf("learner %d, rewards %v: A[%d] = %v with ±1, %v with 0/1", k, gPM, i, aPM[i], a01[i])
				}
			}
		}
	}
	if cases[BaselineWeighted] == 0 || cases[BaselineGuard] == 0 || cases[BaselineUniform] == 0 {
		t.Errorf("the draw missed a baseline rule: %v", cases)
	}
}

// Translation: every reward shifted by c, and the declared range and success
// threshold with it, gives the same advantages (HACPO's capability-weighted
// baseline with random ω, the guard at RewardMax included): Eq 7 anchored at
// RewardMin moves with the rewards. Rewards and shifts are multiples of ¼, so
// the shifted rewards are exact.
func TestAdvantagesTranslationInvariant(t *testing.T) {
	rng := rand.New(rand.NewPCG(32, 4))
	cases := map[BaselineCase]int{}
	for trial := 0; trial < 500; trial++ {
		n := 2 + rng.IntN(3)
		w := make(OmegaMatrix, n)
		for a := range w {
			w[a] = make([]float64, n)
			for b := range w[a] {
				w[a][b] = 1
				if a != b {
					w[a][b] = 0.1 + 9.9*rng.Float64()
				}
			}
		}
		var g []Response
		for a := 0; a < n; a++ {
			for i := 1 + rng.IntN(4); i > 0; i-- {
				r := float64(rng.IntN(2))
				if trial%2 == 1 {
					r = float64(rng.IntN(5)) / 4 // in [0, 1]
				}
				g = append(g, Response{a, r})
			}
		}
		c := float64(rng.IntN(41)-20) / 4
		base, moved := MustPreset("hacpo"), MustPreset("hacpo")
		moved.SetRewards(c, 1+c, c)
		shifted := make([]Response, len(g))
		for i, r := range g {
			shifted[i] = Response{r.Source, r.Reward + c}
		}
		for k := 0; k < n; k++ {
			a0, a1 := make([]float64, len(g)), make([]float64, len(g))
			g0, err := base.GroupAdvantages(k, g, w.Omega, a0)
			if err != nil {
				t.Fatal(err)
			}
			g1, err := moved.GroupAdvantages(k, shifted, w.Omega, a1)
			if err != nil {
				t.Fatal(err)
			}
			if g0.Case != g1.Case || !near(g1.Baseline, g0.Baseline+c, 1e-12) {
				t.Fatalf("shift %v, learner %d, rewards %v: baseline %v (%v), shifted %v (%v)", c, k, g, g0.Baseline, g0.Case, g1.Baseline, g1.Case)
			}
			cases[g0.Case]++
			for i := range a0 {
				if !near(a1[i], a0[i], 1e-9) {
					t.Fatalf("shift %v, learner %d, rewards %v: A[%d] = %v, shifted %v", c, k, g, i, a0[i], a1[i])
				}
			}
		}
	}
	if cases[BaselineWeighted] == 0 || cases[BaselineGuard] == 0 || cases[BaselineGuardNoSelf]+cases[BaselineUniform] == 0 {
		t.Errorf("the draw missed a baseline rule: %v", cases)
	}
}

// The guard replaces a weighted baseline above RewardMax, wherever the range
// is. Learner 0 with ω(0, 1) = 3, own rewards (1, 0), agent 1's (1, 1):
//
//	[0, 1]:  μ̂ = (1 + 0 + 3 + 3)/4 = 7/4 > 1  → own mean ½
//	[0, 2]:  μ̂ = 7/4 ≤ 2                       → kept
//	[−1, 1], rewards 2R − 1 = (1, −1), (1, 1):
//	         μ̂ = −1 + (2 + 0 + 3·2 + 3·2)/4 = 5/2 > 1 → own mean 0
func TestBaselineGuardAtRewardMax(t *testing.T) {
	w := OmegaMatrix{{1, 3}, {1.0 / 3, 1}}
	for _, c := range []struct {
		name     string
		min, max float64
		rewards  []Response
		baseline float64
		rule     BaselineCase
	}{
		{"[0,1]", 0, 1, group([]float64{1, 0}, []float64{1, 1}), 0.5, BaselineGuard},
		{"[0,2]", 0, 2, group([]float64{1, 0}, []float64{1, 1}), 1.75, BaselineWeighted},
		{"[-1,1]", -1, 1, group([]float64{1, -1}, []float64{1, 1}), 0, BaselineGuard},
	} {
		s := MustPreset("hacpo")
		s.SetRewards(c.min, c.max, c.min)
		adv := make([]float64, 4)
		ga, err := s.GroupAdvantages(0, c.rewards, w.Omega, adv)
		if err != nil {
			t.Fatal(err)
		}
		if ga.Case != c.rule || !near(ga.Baseline, c.baseline, 1e-15) {
			t.Errorf("%s: baseline %v (%v), want %v (%v)", c.name, ga.Baseline, ga.Case, c.baseline, c.rule)
		}
		for i, r := range c.rewards {
			if want := (r.Reward - c.baseline) / ga.Denominator; !near(adv[i], want, 1e-15) {
				t.Errorf("%s: A[%d] = %v, want %v", c.name, i, adv[i], want)
			}
		}
	}
}

// The capability's success threshold and anchor (decision 32).
//
//	positive-rate, success ½:  (0.5, 1, 0.7, 0) → 1 and 0.7 exceed ½ (½ does not): 2/4
//	positive-rate, success 0:  (−1, 1, 0, 2)    → 2/4
//	mean-reward, min −1:       (−1, 1, 0)       → mean 0 less −1: 1
//	mean-reward, min −1:       (−1, −1)         → 0, floored at 1e-8
//	mean-reward, min 2:        (2.5, 3, 4.5)    → mean 10/3 less 2: 4/3
func TestCapabilitySuccessAndRewardMin(t *testing.T) {
	for _, c := range []struct {
		metric       CapabilityMetric
		success, min float64
		rewards      []float64
		want         float64
	}{
		{PositiveRate, 0.5, 0, []float64{0.5, 1, 0.7, 0}, 0.5},
		{PositiveRate, 0, -1, []float64{-1, 1, 0, 2}, 0.5},
		{MeanReward, 0, -1, []float64{-1, 1, 0}, 1},
		{MeanReward, 0, -1, []float64{-1, -1}, 1e-8},
		{MeanReward, 2.5, 2, []float64{2.5, 3, 4.5}, 4.0 / 3},
	} {
		cs := DefaultCapability()
		cs.Metric, cs.Success, cs.RewardMin = c.metric, c.success, c.min
		if err := cs.Validate(); err != nil {
			t.Fatal(err)
		}
		if got, err := cs.StepValue(c.rewards); err != nil || !near(got, c.want, 1e-15) {
			t.Errorf("%s success %v min %v on %v: %v, %v; want %v", c.metric, c.success, c.min, c.rewards, got, err, c.want)
		}
	}
}

// Dynamic sampling's filter: a method that shares rollouts keeps a prompt
// whose joint rewards differ; one that does not keeps it when some agent's
// own rewards differ (or an agent has a single response, as verl keeps it).
func TestKeepsPrompt(t *testing.T) {
	sharing, alone := MustPreset("hacpo"), MustPreset("dapo")
	for _, c := range []struct {
		name          string
		g             []Response
		shared, alone bool
	}{
		{"all equal", group([]float64{1, 1}, []float64{1, 1}), false, false},
		{"each agent uniform, agents differ", group([]float64{1, 1}, []float64{0, 0}), true, false},
		{"one agent mixed", group([]float64{1, 0}, []float64{0, 0}), true, true},
		{"non-binary equal", group([]float64{0.5, 0.5, 0.5}), false, false},
		{"non-binary mixed", group([]float64{0.5, 0.25, 0.5}), true, true},
		{"an agent's single response", group([]float64{1, 1}, []float64{1}), false, true},
		{"one response", group([]float64{0}), true, true},
		{"empty", nil, true, true},
	} {
		if got := sharing.KeepsPrompt(c.g); got != c.shared {
			t.Errorf("%s: sharing keeps %v, want %v", c.name, got, c.shared)
		}
		if got := alone.KeepsPrompt(c.g); got != c.alone {
			t.Errorf("%s: not sharing keeps %v, want %v", c.name, got, c.alone)
		}
	}
}

// DAPO's overlong reward with max_new_tokens 16, buffer 4, penalty 1: the ramp
// starts after 16 − 4 = 12 tokens and reaches −1 at 16: −(n − 12)/4.
func TestOverlongRewardRamp(t *testing.T) {
	s := MustPreset("dapo")
	s.OverlongBuffer = 4
	for _, c := range []struct {
		length int
		want   float64
	}{
		{0, 0}, {11, 0}, {12, 0}, // before and at the ramp's start
		{13, -0.25}, {14, -0.5}, // the middle
		{16, -1}, // the end
	} {
		if got, err := s.OverlongReward(c.length, 16); err != nil || got != c.want {
			t.Errorf("length %d: %v, %v; want %v", c.length, got, err, c.want)
		}
	}
	s.OverlongPenalty = 0.5 // half the slope
	if got, _ := s.OverlongReward(14, 16); got != -0.25 {
		t.Errorf("penalty 0.5 at 14 tokens: %v, want −0.25", got)
	}
	for _, c := range []struct {
		buffer, max int
		want        string
	}{
		{0, 16, "overlong_buffer must be in [1, max_new_tokens = 16], got 0"},
		{17, 16, "got 17"},
	} {
		s.OverlongBuffer = c.buffer
		if _, err := s.OverlongReward(3, c.max); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("buffer %d, max %d: %v, want an error with %q", c.buffer, c.max, err, c.want)
		}
	}
	s.OverlongPenalty = 0 // off: no buffer needed
	if got, err := s.OverlongReward(16, 16); got != 0 || err != nil {
		t.Errorf("penalty 0: %v, %v", got, err)
	}
}

// The mean-reward capability moves with RewardMin: rewards shifted by c with
// RewardMin shifted by c give the same capabilities, hence the same ω, over a
// window of steps with random rewards in [0, 1] (multiples of ¼, exact when
// shifted).
func TestCapabilityMeanRewardTranslationInvariant(t *testing.T) {
	rng := rand.New(rand.NewPCG(32, 5))
	for _, c := range []float64{-1, 0.5, 3.25, -7.75} {
		base := DefaultCapability()
		base.Metric = MeanReward
		moved := base
		moved.RewardMin = c
		t0, t1 := newTracker(t, 3, base), newTracker(t, 3, moved)
		for step := 0; step < 7; step++ {
			var r0, r1 [][]float64
			for a := 0; a < 3; a++ {
				var x0, x1 []float64
				for i := 0; i < 4; i++ {
					r := float64(rng.IntN(5)) / 4
					x0, x1 = append(x0, r), append(x1, r+c)
				}
				r0, r1 = append(r0, x0), append(r1, x1)
			}
			update(t, t0, r0...)
			update(t, t1, r1...)
			for a := 0; a < 3; a++ {
				for b := 0; b < 3; b++ {
					if w0, w1 := t0.Omega(a, b), t1.Omega(a, b); !near(w0, w1, 1e-12) {
						t.Fatalf("shift %v, step %d: ω(%d, %d) = %v, shifted %v", c, step, a, b, w0, w1)
					}
				}
			}
		}
	}
}
