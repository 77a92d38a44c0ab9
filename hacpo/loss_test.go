package hacpo

import (
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
)

func checkTerm(t *testing.T, name string, got Term, ratio, value, grad float64, clip Clip) {
	t.Helper()
	if !near(got.Ratio, ratio, tol) || !near(got.Value, value, tol) || !near(got.Grad, grad, tol) || got.Clip != clip {
		t.Errorf("%s: got %+v, want ratio %.15g value %.15g grad %.15g clip %d", name, got, ratio, value, grad, clip)
	}
}

// GSPO self term (Eq 47–49), clip [1 − 3e-4, 1 + 4e-4], by hand.
func TestSelfTermGolden(t *testing.T) {
	s := MustPreset("hacpo")
	// Inside: mean lp −1.0, old −1.0002 → s = e^0.0002 ≈ 1.00020002 ∈ [0.9997, 1.0004].
	// Value −s·A, gradient d(−s·A)/dμ = −s·A (ds/dμ = s).
	r := math.Exp(0.0002)
	checkTerm(t, "inside A=2", s.SelfTerm(-1.0, -1.0002, 2), r, -r*2, -r*2, Inside)
	// Above, A > 0: s = e^0.001 > 1.0004: min(s·A, 1.0004·A) = 1.0004·A; constant → gradient 0.
	r = math.Exp(0.001)
	checkTerm(t, "above A>0", s.SelfTerm(-1.0, -1.001, 2), r, -1.0004*2, 0, Above)
	// Above, A < 0: min(s·A, 1.0004·A) = s·A (more negative) → gradient −s·A.
	checkTerm(t, "above A<0", s.SelfTerm(-1.0, -1.001, -2), r, r*2, r*2, Above)
	// Below, A > 0: s = e^−0.001 < 0.9997: min = s·A → gradient −s·A.
	r = math.Exp(-0.001)
	checkTerm(t, "below A>0", s.SelfTerm(-1.001, -1.0, 2), r, -r*2, -r*2, Below)
	// Below, A < 0: min(s·A, 0.9997·A) = 0.9997·A → constant.
	checkTerm(t, "below A<0", s.SelfTerm(-1.001, -1.0, -2), r, 0.9997*2, 0, Below)
	// Log-ratio clamp ±10: ratio e^10, constant.
	checkTerm(t, "log clamp", s.SelfTerm(0, -15, -1), math.Exp(10), math.Exp(10), 0, Above)
}

// Cross term (Eq 50–52), δ = 0.2, δ_step = 0.025, by hand.
func TestCrossTermGolden(t *testing.T) {
	s := MustPreset("hacpo") // α = 1
	// s = exp(−1.1 − (−1.0)) = e^−0.1 ≈ 0.904837 ∈ [0.8, 1]; ω = 2; A = 0.5.
	// Value = −s·sg(s)^1·ω·A = −s²·1; gradient = −sg(s)^(α+1)·ω·A = −s².
	r := math.Exp(-0.1)
	checkTerm(t, "inside", s.CrossTerm(0, -1.1, -1.0, 0.5, 2), r, -r*r*2*0.5, -r*r*2*0.5, Inside)
	// α = 3: value −s⁴·ω·A, gradient the same (−sg(s)^4·ω·A).
	a3 := s
	a3.Alpha = 3
	checkTerm(t, "alpha 3", a3.CrossTerm(0, -1.1, -1.0, 0.5, 2), r, -math.Pow(r, 4), -math.Pow(r, 4), Inside)
	// α = 0.5: value −s^1.5·ω·A.
	a3.Alpha = 0.5
	checkTerm(t, "alpha 0.5", a3.CrossTerm(0, -1.1, -1.0, 0.5, 2), r, -math.Pow(r, 1.5), -math.Pow(r, 1.5), Inside)
	// Below: s = e^−0.3 ≈ 0.7408 < 0.8 → clip = 0.8: value −0.8·0.8·ω·A, gradient exactly 0,
	// for either sign of A.
	r = math.Exp(-0.3)
	checkTerm(t, "below A>0", s.CrossTerm(0, -1.3, -1.0, 0.5, 2), r, -0.8*0.8*2*0.5, 0, Below)
	checkTerm(t, "below A<0", s.CrossTerm(0, -1.3, -1.0, -0.5, 2), r, 0.8*0.8*2*0.5, 0, Below)
	// Above 1: s = e^0.05 → clip 1: value −1·1·ω·A, gradient 0 (also with A < 0).
	r = math.Exp(0.05)
	checkTerm(t, "above A<0", s.CrossTerm(0, -0.95, -1.0, -0.5, 2), r, 1*2*0.5, 0, Above)
	// no-omega: ω ignored (1).
	no := MustPreset("no-omega")
	r = math.Exp(-0.1)
	checkTerm(t, "no-omega", no.CrossTerm(0, -1.1, -1.0, 0.5, 2), r, -r*r*0.5, -r*r*0.5, Inside)
	// no-cross-clip: s = e^−0.3 is not clamped; value −s²·ω·A with gradient.
	nc := MustPreset("no-cross-clip")
	r = math.Exp(-0.3)
	checkTerm(t, "no-cross-clip", nc.CrossTerm(3, -1.3, -1.0, 0.5, 2), r, -r*r, -r*r, Inside)
	// Naive: the GSPO PPO min with the self range; s = e^−0.1 < 0.9997 and A > 0: the
	// unclipped branch, value −s·A, gradient −s·A; no ω, no α.
	nv := MustPreset("naive")
	r = math.Exp(-0.1)
	checkTerm(t, "naive A>0", nv.CrossTerm(2, -1.1, -1.0, 0.5, 2), r, -r*0.5, -r*0.5, Below)
	checkTerm(t, "naive A<0", nv.CrossTerm(2, -1.1, -1.0, -0.5, 2), r, 0.9997*0.5, 0, Below)
	// CrossPositiveOnly: A < 0 contributes nothing (value and gradient 0, the ratio
	// still reported); A > 0 is HACPO's term unchanged.
	po := MustPreset("hacpo")
	po.CrossPositiveOnly = true
	checkTerm(t, "positive-only A<0", po.CrossTerm(0, -1.1, -1.0, -0.5, 2), r, 0, 0, Inside)
	checkTerm(t, "positive-only A>0", po.CrossTerm(0, -1.1, -1.0, 0.5, 2), r, -r*r*2*0.5, -r*r*2*0.5, Inside)
}

// The lower bound tightens with m: 0.8, 0.825, 0.85, 0.875, ..., capped at 1; a
// sample with s = 0.83 has a gradient in m = 0, 1 and none from m = 2 on.
func TestStepwiseBound(t *testing.T) {
	s := MustPreset("hacpo")
	for m, want := range []float64{0.8, 0.825, 0.85, 0.875} {
		if got := s.CrossLower(m); !near(got, want, 1e-15) {
			t.Errorf("L_%d = %v, want %v", m, got, want)
		}
	}
	if got := s.CrossLower(8); got != 1 {
		t.Errorf("L_8 = %v, want the cap 1 (0.8 + 8·0.025 = 1.0)", got)
	}
	if got := s.CrossLower(100); got != 1 {
		t.Errorf("L_100 = %v, want 1", got)
	}
	lr := math.Log(0.83)
	for m := 0; m < 6; m++ {
		tm := s.CrossTerm(m, lr-1, -1, 1, 1)
		if inside := m < 2; inside != (tm.Grad != 0) || inside != (tm.Clip == Inside) {
			t.Errorf("m = %d: s = 0.83, L = %v: %+v", m, s.CrossLower(m), tm)
		}
	}
	// no-stepwise: static 0.8.
	ns := MustPreset("no-stepwise")
	for m := 0; m < 6; m++ {
		if ns.CrossLower(m) != 1-0.2 || ns.CrossTerm(m, lr-1, -1, 1, 1).Grad == 0 {
			t.Errorf("no-stepwise m = %d: L = %v", m, ns.CrossLower(m))
		}
	}
}

// Prop D.6: inside the clamp the cross gradient per unit of mean log-prob is
// −sg(s)^(α+1)·ω·A (the loss is the negated objective); Prop D.5: the self
// gradient inside the clip range is −s·A.
func TestGradientPropositions(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, alpha := range []float64{0, 0.5, 1, 2, 3, 1.7} {
		s := MustPreset("hacpo")
		s.Alpha = alpha
		for i := 0; i < 200; i++ {
			sr := 0.8 + 0.2*rng.Float64() // inside [0.8, 1]
			src := -3 * rng.Float64()
			A, om := rng.NormFloat64(), 0.1+9.9*rng.Float64()
			tm := s.CrossTerm(0, src+math.Log(sr), src, A, om)
			want := -math.Pow(sr, alpha+1) * om * A
			if !near(tm.Grad, want, 1e-9) {
				t.Fatalf("α = %v s = %v: grad %v, want %v", alpha, sr, tm.Grad, want)
			}
		}
	}
	s := MustPreset("hacpo")
	for i := 0; i < 200; i++ {
		sr := 1 - 3e-4 + 7e-4*rng.Float64()
		A := rng.NormFloat64()
		tm := s.SelfTerm(-1+math.Log(sr), -1, A)
		if !near(tm.Grad, -sr*A, 1e-9) {
			t.Fatalf("self s = %v: grad %v, want %v", sr, tm.Grad, -sr*A)
		}
	}
}

// Central finite differences of every scalar term against its analytic derivative,
// at random points away from the kinks (clip edges, clamps).
func TestTermsFiniteDifferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const h = 1e-6
	fd := func(f func(x float64) float64, x float64) float64 { return (f(x+h) - f(x-h)) / (2 * h) }
	awayFrom := func(x float64, kinks ...float64) bool {
		for _, k := range kinks {
			if math.Abs(x-k) < 1e-4 {
				return false
			}
		}
		return true
	}
	hacpo, grpo := MustPreset("hacpo"), MustPreset("grpo")
	grpo.DualClip = 3
	settings := []Settings{hacpo, MustPreset("naive"), MustPreset("no-cross-clip"), MustPreset("no-omega")}
	checked := 0
	for i := 0; i < 4000; i++ {
		A := 2 * rng.NormFloat64()
		om := 0.1 + 9.9*rng.Float64()
		old := -4 * rng.Float64()
		// Self: log ratio within ±1e-3 so both sides of the tiny clip range occur.
		x := old + (rng.Float64()*2-1)*1e-3
		if awayFrom(math.Exp(x-old), 1-3e-4, 1+4e-4) {
			st := hacpo.SelfTerm(x, old, A)
			if g := fd(func(x float64) float64 { return hacpo.SelfTerm(x, old, A).Value }, x); !near(g, st.Grad, 1e-6) {
				t.Fatalf("self FD %v vs %v at s = %v A = %v", g, st.Grad, st.Ratio, A)
			}
			checked++
		}
		// Cross: ratio in [0.6, 1.2] to cover clamps on both sides.
		m := rng.IntN(5)
		y := old + math.Log(0.6+0.6*rng.Float64())
		for _, s := range settings {
			r := math.Exp(y - old)
			if !awayFrom(r, s.CrossLower(m), 1, 1-3e-4, 1+4e-4) {
				continue
			}
			ct := s.CrossTerm(m, y, old, A, om)
			// The surrogate: the detached factor sg(clip(s))^α is held at its value at y.
			g := fd(func(y2 float64) float64 {
				return s.crossTerm(m, &Sample{OldMeanLogProb: old, Advantage: A, Omega: om, CrossAnchor: 1}, y2, y).Value
			}, y)
			if !near(g, ct.Grad, 1e-6) {
				t.Fatalf("%s cross FD %v vs %v at s = %v m = %d", s.Method, g, ct.Grad, r, m)
			}
			// Without holding it, the value's derivative is (1+α)·Grad inside the clamp:
			// the stop-gradient is what makes Prop D.6's sg(s)^(α+1) the gradient.
			if ct.Clip == Inside && s.CrossRule == CrossHACPO {
				full := fd(func(y2 float64) float64 { return s.CrossTerm(m, y2, old, A, om).Value }, y)
				if !near(full, (1+s.Alpha)*ct.Grad, 1e-6) {
					t.Fatalf("%s: d(value)/dμ = %v, want (1+α)·grad = %v", s.Method, full, (1+s.Alpha)*ct.Grad)
				}
			}
			if ct.Clip != Inside && ct.Grad != 0 && s.CrossRule == CrossHACPO {
				t.Fatalf("%s: clamped cross sample has gradient %v", s.Method, ct.Grad)
			}
			checked++
		}
		// Token (GRPO, with dual clip): token log ratio within ±1.5.
		z := old + (rng.Float64()*2-1)*1.5
		if r := math.Exp(z - old); awayFrom(r, 0.8, 1.28, 3) && awayFrom(-A*3, -A*r) {
			tt := grpo.TokenTerm(z, old, A)
			if g := fd(func(z float64) float64 { return grpo.TokenTerm(z, old, A).Value }, z); !near(g, tt.Grad, 1e-6) {
				t.Fatalf("token FD %v vs %v at r = %v A = %v", g, tt.Grad, r, A)
			}
			checked++
		}
		// KL3 at lp, ref.
		lp, ref := -5*rng.Float64(), -5*rng.Float64()
		_, d := KL3(lp, ref)
		if g := fd(func(lp float64) float64 { v, _ := KL3(lp, ref); return v }, lp); !near(g, d, 1e-6) {
			t.Fatalf("KL3 FD %v vs %v", g, d)
		}
	}
	if checked < 10000 {
		t.Errorf("only %d points checked", checked)
	}
}

func TestKL3Golden(t *testing.T) {
	// lp = −1, ref = −1.5: d = −0.5, k3 = e^−0.5 + 0.5 − 1, d/dlp = 1 − e^−0.5.
	v, g := KL3(-1, -1.5)
	if !near(v, math.Exp(-0.5)+0.5-1, tol) || !near(g, 1-math.Exp(-0.5), tol) {
		t.Errorf("KL3 = %v, %v", v, g)
	}
	if v, g := KL3(-2, -2); v != 0 || g != 0 {
		t.Errorf("KL3 at equality = %v, %v", v, g)
	}
	// d = 15: e^15 − 16 > 10 → capped at 10, gradient 0.
	if v, g := KL3(-20, -5); v != 10 || g != 0 {
		t.Errorf("KL3 capped = %v, %v", v, g)
	}
	// d = −25 → clamped to −20: e^−20 + 19, capped at 10.
	if v, g := KL3(0, -25); v != 10 || g != 0 {
		t.Errorf("KL3 clamped = %v, %v", v, g)
	}
}

func TestDualClipGolden(t *testing.T) {
	s := MustPreset("grpo")
	// r = e^1.5 ≈ 4.48 > 1.28 with A = −1: PPO min → r·A (value r); dual clip c = 3 caps at 3.
	r := math.Exp(1.5)
	checkTerm(t, "no dual clip", s.TokenTerm(-1, -2.5, -1), r, r, r, Above)
	s.DualClip = 3
	checkTerm(t, "dual clip", s.TokenTerm(-1, -2.5, -1), r, 3, 0, Above)
	// r = e^0.1 inside [0.8, 1.28]: value −r·A.
	r = math.Exp(0.1)
	checkTerm(t, "grpo inside", s.TokenTerm(-1, -1.1, 2), r, -2*r, -2*r, Inside)
}

// randomBatch makes a mini-batch of self and cross samples with KL references.
func randomBatch(rng *rand.Rand, nSelf, nCross, maxT int, token bool) ([]Sample, [][]float64) {
	var samples []Sample
	var lps [][]float64
	for b := 0; b < nSelf+nCross; b++ {
		T := 1 + rng.IntN(maxT)
		lp := make([]float64, T)
		for t := range lp {
			lp[t] = -3 * rng.Float64()
		}
		sm := Sample{Self: b < nSelf, Advantage: 2 * rng.NormFloat64(), Omega: 0.1 + 9.9*rng.Float64()}
		if sm.Self {
			sm.OldLogProbs = make([]float32, T)
			sm.RefLogProbs = make([]float32, T)
			for t := range lp {
				sm.OldLogProbs[t] = float32(lp[t] + 0.3*rng.NormFloat64()*0.001)
				if token {
					sm.OldLogProbs[t] = float32(lp[t] + 0.1*rng.NormFloat64())
				}
				sm.RefLogProbs[t] = float32(lp[t] + 0.5*rng.NormFloat64())
			}
			sm.OldMeanLogProb = MeanLogProb(sm.OldLogProbs)
		} else {
			sm.Source = 1 + rng.IntN(2)
			sm.OldMeanLogProb = MeanLogProb(lp) - math.Log(0.7+0.4*rng.Float64())
		}
		samples = append(samples, sm)
		lps = append(lps, lp)
	}
	return samples, lps
}

// with returns the preset name with edit applied.
func with(name string, edit func(*Settings)) Settings {
	s := MustPreset(name)
	edit(&s)
	return s
}

// aggregated returns the preset name with the loss aggregation agg (and
// loss_agg_tokens 12, the longest response of randomBatch) and the KL
// estimator est.
func aggregated(name string, agg LossAgg, est KLEstimator) Settings {
	return with(name, func(s *Settings) { s.LossAgg, s.LossAggTokens, s.KLEstimator = agg, 12, est })
}

// Finite differences of MiniBatchLoss (Total) with respect to individual token
// log-probs, for HACPO (sequence ratio, cross terms, KL) and GRPO (token ratio,
// KL), under every loss aggregation and KL estimator, with masked samples
// (every third one, when masked). CISPO is not here: its gradient is that of
// the surrogate −sg(c)·A·lp while Total holds −c·A, so a finite difference of
// Total does not give it; TestLossAgainstTorch checks it against autograd.
func TestMiniBatchLossFiniteDifferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	for _, c := range []struct {
		s            Settings
		nSelf, nCros int
		masked       bool
	}{
		{MustPreset("hacpo"), 6, 10, false},
		{MustPreset("naive"), 5, 5, false},
		{MustPreset("no-cross-clip"), 3, 5, false},
		{MustPreset("gspo"), 8, 0, false},
		{MustPreset("grpo"), 8, 0, false},
		{original(MustPreset("hacpo")), 6, 10, false},
		{original(MustPreset("grpo")), 8, 0, false},
		// Every aggregation, token and sequence ratio, k1 and k2 as well as k3.
		{aggregated("grpo", TokenMean, KLK1), 6, 0, false},
		{aggregated("grpo", SeqMeanTokenSum, KLK2), 6, 0, true},
		{aggregated("grpo", SeqMeanTokenSumNorm, KLK3), 6, 0, false},
		{aggregated("grpo", SeqMeanTokenMean, KLK2), 6, 0, true},
		{aggregated("gspo", TokenMean, KLK2), 6, 0, true},
		{aggregated("gspo", SeqMeanTokenSum, KLK1), 6, 0, false},
		{aggregated("gspo", SeqMeanTokenSumNorm, KLK1), 6, 0, true},
		{with("grpo", func(s *Settings) { s.DualClip = 3 }), 6, 0, true},
		// HACPO's cross samples under the token aggregations.
		{aggregated("hacpo", TokenMean, KLK3), 4, 6, false},
		{aggregated("hacpo", SeqMeanTokenSum, KLK1), 4, 6, false},
		{aggregated("hacpo", TokenMean, KLK2), 4, 6, true},
		{aggregated("hacpo", SeqMeanTokenSumNorm, KLK3), 4, 6, true},
		{aggregated("naive", SeqMeanTokenSum, KLK3), 4, 6, true},
		{MustPreset("hacpo"), 6, 10, true},
	} {
		s := c.s
		s.KLCoef = 0.05 // large enough to matter in the check
		checked, kinks := 0, 0
		for trial := 0; trial < 10; trial++ {
			samples, lps := randomBatch(rng, c.nSelf, c.nCros, 12, s.RatioLevel == TokenLevel)
			if c.masked {
				for b := 1; b < len(samples); b += 3 {
					samples[b].Masked = true
				}
			}
			n, k, _ := checkFiniteDifferences(t, s, rng.IntN(4), samples, lps)
			checked, kinks = checked+n, kinks+k
		}
		if kinks > checked/10 {
			t.Errorf("%s (%s): %d coordinates at a kink, %d checked", s.Method, s.Aggregation(), kinks, checked)
		}
	}
}

// checkFiniteDifferences compares MiniBatchLoss64's gradient for mini-batch
// m with central differences of Total in every token log-prob, the detached
// α factor of cross terms held at its value (the surrogate whose gradient
// the loss returns), and fails t at the first disagreement; masked samples
// must have no gradient. It returns the coordinates checked, those skipped
// at a kink (the one-sided differences disagree: a clip bound inside
// [x−h, x+h]) and the loss.
func checkFiniteDifferences(t *testing.T, s Settings, m int, samples []Sample, lps [][]float64) (checked, kinks int, loss Loss) {
	t.Helper()
	const h = 1e-6
	grad := make([][]float64, len(lps))
	scratch := make([][]float64, len(lps))
	frozen := make([]float64, len(lps))
	for b := range lps {
		grad[b] = make([]float64, len(lps[b]))
		scratch[b] = make([]float64, len(lps[b]))
		frozen[b] = MeanLogProb(lps[b])
	}
	loss, err := s.MiniBatchLoss64(m, samples, lps, grad)
	if err != nil {
		t.Fatal(err)
	}
	total := func() float64 {
		l, err := miniBatchLoss(s, m, samples, lps, scratch, frozen)
		if err != nil {
			t.Fatal(err)
		}
		return l.Total
	}
	if !near(total(), loss.Total, 0) {
		t.Fatal("loss not deterministic")
	}
	for b := range lps {
		for tk := range lps[b] {
			x := lps[b][tk]
			lps[b][tk] = x + h
			up := total()
			lps[b][tk] = x - h
			dn := total()
			lps[b][tk] = x
			mid := total()
			if !near((up-mid)/h, (mid-dn)/h, 1e-4) {
				kinks++
				continue
			}
			checked++
			if fd := (up - dn) / (2 * h); math.Abs(fd-grad[b][tk]) > 1e-7 {
				t.Fatalf("%s (%s, %s, cross bounds %q) m=%d sample %d (self %v, masked %v) token %d: FD %.10g, analytic %.10g",
					s.Method, s.Aggregation(), s.KLEstimator, s.CrossBounds, m, b, samples[b].Self, samples[b].Masked, tk, fd, grad[b][tk])
			}
			if samples[b].Masked && grad[b][tk] != 0 {
				t.Fatalf("%s: masked sample %d has gradient %v", s.Method, b, grad[b][tk])
			}
		}
	}
	return checked, kinks, loss
}

// The aggregation by hand: Total = (1/B) Σ policy_b + coef·(1/B) Σ_self KL_b, B counting
// clamped sequences; gradient rows of clamped cross samples are exactly zero.
func TestMiniBatchLossAggregation(t *testing.T) {
	s := MustPreset("hacpo")
	m := 2 // L_2 = 0.85
	lpSelf := []float32{-1, -2}
	old := []float32{-1.0001, -2.0001} // mean −1.5001 → s = e^0.0001, inside
	ref := []float32{-1.5, -2}
	samples := []Sample{
		{Self: true, Source: 0, Advantage: 1, OldMeanLogProb: MeanLogProb(old), OldLogProbs: old, RefLogProbs: ref},
		{Self: false, Source: 1, Advantage: -0.5, Omega: 2, OldMeanLogProb: -1 + 0.1},   // s = e^−0.1 ≈ 0.905 inside
		{Self: false, Source: 1, Advantage: 0.7, Omega: 2, OldMeanLogProb: -1 + 0.3},    // s = e^−0.3 ≈ 0.741 < 0.85: clamped
		{Self: false, Source: 2, Advantage: 0.7, Omega: 0.5, OldMeanLogProb: -1 - 0.02}, // s = e^0.02 > 1: clamped
	}
	lps := [][]float32{lpSelf, {-1, -1, -1}, {-0.5, -1.5}, {-1}}
	loss, grad, err := s.MiniBatchLoss(m, samples, lps)
	if err != nil {
		t.Fatal(err)
	}
	s0 := math.Exp(-1.5 - MeanLogProb(old))
	p0 := -s0 * 1                               // self, inside
	s1 := math.Exp(-0.1)                        // cross inside
	p1 := -s1 * s1 * 2 * -0.5                   // −s·s·ω·A
	p2 := -0.85 * 0.85 * 2 * 0.7                // clamped at L_2
	p3 := -1.0 * 1 * 0.5 * 0.7                  // clamped at 1
	kl0 := ((math.Exp(-0.5) + 0.5 - 1) + 0) / 2 // token mean of k3 for (−1 vs −1.5) and (−2 vs −2)
	wantPolicy := (p0 + p1 + p2 + p3) / 4
	wantKL := kl0 / 4
	if !near(loss.Policy, wantPolicy, 1e-12) || !near(loss.KL, wantKL, 1e-7) || !near(loss.Total, wantPolicy+0.001*wantKL, 1e-12) {
		t.Errorf("loss = %+v, want policy %v KL %v", loss, wantPolicy, wantKL)
	}
	// Gradients: self token t: (1/4)·[(−s0·1)/2 + 0.001·(1 − e^(ref−lp))/2].
	g00 := 0.25 * (-s0/2 + 0.001*(1-math.Exp(-0.5))/2)
	g01 := 0.25 * (-s0 / 2)
	if !near(float64(grad[0][0]), g00, 1e-6) || !near(float64(grad[0][1]), g01, 1e-6) {
		t.Errorf("self grads %v, want %v %v", grad[0], g00, g01)
	}
	for tk := range grad[1] {
		if want := 0.25 * (-s1 * s1 * 2 * -0.5) / 3; !near(float64(grad[1][tk]), want, 1e-6) {
			t.Errorf("cross grad %v, want %v", grad[1][tk], want)
		}
	}
	for _, b := range []int{2, 3} {
		for _, g := range grad[b] {
			if g != 0 {
				t.Errorf("clamped sample %d has gradient %v", b, grad[b])
			}
		}
	}
	st := loss.Stats
	if st.Sequences != 4 || st.SelfSeqs != 1 || st.CrossSeqs != 3 || st.CrossBelow != 1 || st.CrossAbove != 1 ||
		st.SelfClipped != 0 || st.SelfClipUnits != 1 || !near(st.CrossLowerMean(), 0.85, 1e-15) ||
		!near(st.CrossLowerFrac(), 1.0/3, 1e-15) || !near(st.SelfRatioMean(), s0, 1e-12) ||
		!near(st.CrossRatioMean(), (s1+math.Exp(-0.3)+math.Exp(0.02))/3, 1e-12) {
		t.Errorf("stats = %+v", st)
	}
	var sum Stats
	sum.Add(st)
	sum.Add(st)
	if sum.CrossSeqs != 6 || sum.CrossLowerFrac() != st.CrossLowerFrac() {
		t.Errorf("Add: %+v", sum)
	}
	if len(loss.Seqs) != 4 || loss.Seqs[2].Clip != Below || loss.Seqs[3].Clip != Above || !near(loss.Seqs[0].KL, kl0, 1e-7) {
		t.Errorf("per-sequence: %+v", loss.Seqs)
	}
	// MiniBatchLossInto reuses the gradient buffer and matches.
	buf := [][]float32{make([]float32, 2), make([]float32, 3), make([]float32, 2), {7}}
	l2, err := s.MiniBatchLossInto(m, samples, lps, buf)
	if err != nil || l2.Total != loss.Total || buf[3][0] != 0 || buf[0][0] != grad[0][0] {
		t.Errorf("MiniBatchLossInto: %v %v %v", l2.Total, buf, err)
	}
}

// float32 inputs give the same loss as the float64 path on the same values.
func TestMiniBatchLossFloat32MatchesFloat64(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 11))
	s := MustPreset("hacpo")
	samples, lps64 := randomBatch(rng, 20, 30, 40, false)
	lps32 := make([][]float32, len(lps64))
	for b := range lps64 {
		lps32[b] = make([]float32, len(lps64[b]))
		for t := range lps64[b] {
			lps32[b][t] = float32(lps64[b][t])
			lps64[b][t] = float64(lps32[b][t])
		}
	}
	l32, g32, err := s.MiniBatchLoss(1, samples, lps32)
	if err != nil {
		t.Fatal(err)
	}
	g64 := make([][]float64, len(lps64))
	for b := range g64 {
		g64[b] = make([]float64, len(lps64[b]))
	}
	l64, err := s.MiniBatchLoss64(1, samples, lps64, g64)
	if err != nil {
		t.Fatal(err)
	}
	if l32.Total != l64.Total {
		t.Errorf("totals differ: %v %v", l32.Total, l64.Total)
	}
	for b := range g64 {
		for tk := range g64[b] {
			if g32[b][tk] != float32(g64[b][tk]) {
				t.Fatalf("grad [%d][%d]: %v vs %v", b, tk, g32[b][tk], g64[b][tk])
			}
		}
	}
}

func TestMiniBatchLossErrors(t *testing.T) {
	s := MustPreset("hacpo")
	okSelf := Sample{Self: true, Advantage: 1, OldMeanLogProb: -1, RefLogProbs: []float32{-1}}
	okCross := Sample{Source: 1, Advantage: 1, Omega: 1, OldMeanLogProb: -1}
	cases := []struct {
		name    string
		s       Settings
		m       int
		samples []Sample
		lps     [][]float32
		want    string
	}{
		{"rows", s, 0, []Sample{okSelf}, nil, "log-prob rows"},
		{"no tokens", s, 0, []Sample{okCross}, [][]float32{{}}, "no tokens"},
		{"m < 0", s, -1, []Sample{okCross}, [][]float32{{-1}}, "index"},
		{"nan lp", s, 0, []Sample{okCross}, [][]float32{{float32(math.NaN())}}, "non-finite"},
		{"nan adv", s, 0, []Sample{{Source: 1, Advantage: math.NaN(), Omega: 1}}, [][]float32{{-1}}, "advantage"},
		{"bad omega", s, 0, []Sample{{Source: 1, Advantage: 1, Omega: 0, OldMeanLogProb: -1}}, [][]float32{{-1}}, "ω"},
		{"no ref", s, 0, []Sample{{Self: true, Advantage: 1, OldMeanLogProb: -1}}, [][]float32{{-1}}, "reference"},
		{"old mismatch", s, 0, []Sample{{Self: true, Advantage: 1, OldMeanLogProb: -1, OldLogProbs: []float32{-2}, RefLogProbs: []float32{-1}}}, [][]float32{{-1}}, "disagrees"},
		{"cross in gspo", MustPreset("gspo"), 0, []Sample{okCross}, [][]float32{{-1}}, "own samples"},
		{"grpo no old", MustPreset("grpo"), 0, []Sample{okSelf}, [][]float32{{-1}}, "old log-probs"},
		{"bad settings", Settings{Method: "x"}, 0, []Sample{okCross}, [][]float32{{-1}}, "responses_multiplier"},
	}
	for _, c := range cases {
		_, _, err := c.s.MiniBatchLoss(c.m, c.samples, c.lps)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.want)
		}
	}
	// An empty mini-batch is a zero loss.
	l, g, err := s.MiniBatchLoss(0, nil, nil)
	if err != nil || l.Total != 0 || len(g) != 0 {
		t.Errorf("empty: %+v %v %v", l, g, err)
	}
	// No KL: reference log-probs are not needed.
	nk := s
	nk.KLCoef = 0
	if _, _, err := nk.MiniBatchLoss(0, []Sample{{Self: true, Advantage: 1, OldMeanLogProb: -1}}, [][]float32{{-1}}); err != nil {
		t.Error(err)
	}
}

// Large mini-batches are spread over goroutines; the result must be bit-identical
// to the one-worker computation, and an error must name the lowest failing sample.
func TestMiniBatchLossParallelDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 13))
	s := MustPreset("hacpo")
	samples, lps64 := randomBatch(rng, 400, 600, 128, false) // ≈ 64k tokens
	lps := make([][]float32, len(lps64))
	for b := range lps64 {
		lps[b] = make([]float32, len(lps64[b]))
		for tk := range lps64[b] {
			lps[b][tk] = float32(lps64[b][tk])
		}
	}
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	l1, g1, err := s.MiniBatchLoss(3, samples, lps)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GOMAXPROCS(4)
	l4, g4, err := s.MiniBatchLoss(3, samples, lps)
	if err != nil {
		t.Fatal(err)
	}
	if math.Float64bits(l1.Total) != math.Float64bits(l4.Total) || l1.Stats != l4.Stats {
		t.Fatalf("parallel result differs: %v vs %v", l1.Total, l4.Total)
	}
	for b := range g1 {
		for tk := range g1[b] {
			if math.Float32bits(g1[b][tk]) != math.Float32bits(g4[b][tk]) {
				t.Fatalf("gradient [%d][%d] differs", b, tk)
			}
		}
	}
	samples[900].Advantage = math.NaN()
	samples[700].Advantage = math.Inf(1)
	if _, _, err := s.MiniBatchLoss(3, samples, lps); err == nil || !strings.Contains(err.Error(), "sample 700") {
		t.Errorf("error %v, want one naming sample 700", err)
	}
}
