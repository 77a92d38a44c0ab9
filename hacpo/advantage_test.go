package hacpo

import (
	"math"
	"strings"
	"testing"
)

const tol = 1e-12

func near(a, b, eps float64) bool {
	return math.Abs(a-b) <= eps*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

func checkAdv(t *testing.T, name string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d advantages, want %d", name, len(got), len(want))
	}
	for i := range got {
		if !near(got[i], want[i], tol) {
			t.Errorf("%s: A[%d] = %.15g, want %.15g", name, i, got[i], want[i])
		}
	}
}

// sampleStd is the N−1 standard deviation, written out for the tests.
func sampleStd(xs ...float64) float64 {
	m := 0.0
	for _, x := range xs {
		m += x
	}
	m /= float64(len(xs))
	ss := 0.0
	for _, x := range xs {
		ss += (x - m) * (x - m)
	}
	return math.Sqrt(ss / float64(len(xs)-1))
}

func group(src0 []float64, others ...[]float64) []Response {
	var g []Response
	for i, rs := range append([][]float64{src0}, others...) {
		for _, r := range rs {
			g = append(g, Response{Source: i, Reward: r})
		}
	}
	return g
}

// Eq 6–7 for n = 2, G = 4, by hand. P̂0 = 0.25, P̂1 = 0.75.
func TestAdvantagesEq7Golden(t *testing.T) {
	s := MustPreset("hacpo")
	w := OmegaMatrix{{1, 0.25 / 0.75}, {0.75 / 0.25, 1}} // ω(0,1) = 1/3, ω(1,0) = 3
	g := group([]float64{1, 0, 0, 0}, []float64{1, 1, 0, 1})
	std := sampleStd(1, 0, 0, 0, 1, 1, 0, 1) // 4 ones, 4 zeros: sqrt(8·0.25/7) = sqrt(2/7)
	if !near(std, math.Sqrt(2.0/7.0), tol) {
		t.Fatal(std)
	}
	den := std + 1e-6

	// Learner 0 (weaker): own rewards unscaled, agent 1's × ω(0,1) = 1/3:
	// μ̂ = (1+0+0+0 + (1+1+0+1)/3) / 8 = (1 + 1) / 8 = 0.25.
	mu0 := (1.0 + (1.0+1+0+1)*(0.25/0.75)) / 8
	adv, err := s.Advantages(0, g, w.Omega)
	if err != nil {
		t.Fatal(err)
	}
	checkAdv(t, "learner 0", adv, []float64{(1 - mu0) / den, -mu0 / den, -mu0 / den, -mu0 / den,
		(1 - mu0) / den, (1 - mu0) / den, -mu0 / den, (1 - mu0) / den})

	// Learner 1 (stronger): agent 0's rewards × ω(1,0) = 3:
	// μ̂ = (3·1 + 1+1+0+1) / 8 = 6/8 = 0.75 (≤ 1, no guard).
	mu1 := (3*1.0 + 3) / 8
	var ga GroupAdvantage
	adv1 := make([]float64, len(g))
	ga, err = s.GroupAdvantages(1, g, w.Omega, adv1)
	if err != nil {
		t.Fatal(err)
	}
	if ga.Case != BaselineWeighted || !near(ga.Baseline, mu1, tol) || !near(ga.Std, std, tol) || ga.Used != 8 {
		t.Errorf("group = %+v, want baseline %v std %v", ga, mu1, std)
	}
	checkAdv(t, "learner 1", adv1, []float64{(1 - mu1) / den, -mu1 / den, -mu1 / den, -mu1 / den,
		(1 - mu1) / den, (1 - mu1) / den, -mu1 / den, (1 - mu1) / den})

	// no-adv: the plain joint mean 4/8 = 0.5 for both learners.
	na := MustPreset("no-adv")
	adv, _ = na.Advantages(0, g, w.Omega)
	checkAdv(t, "no-adv", adv, []float64{0.5 / den, -0.5 / den, -0.5 / den, -0.5 / den, 0.5 / den, 0.5 / den, -0.5 / den, 0.5 / den})
	// Without std normalisation the denominator is exactly 1 (no ε).
	ns := s
	ns.NormalizeStd = false
	adv, _ = ns.Advantages(0, g, w.Omega)
	checkAdv(t, "no std", adv, []float64{1 - mu0, -mu0, -mu0, -mu0, 1 - mu0, 1 - mu0, -mu0, 1 - mu0})
}

func TestAdvantagesEdgeCases(t *testing.T) {
	s := MustPreset("hacpo")
	w := OmegaMatrix{{1, 10}, {0.1, 1}}

	// Uniform rewards: the plain mean, advantages exactly 0 (numerator 0, std 0 → 0/ε).
	for _, r := range []float64{0, 1} {
		g := group([]float64{r, r}, []float64{r, r})
		adv := make([]float64, 4)
		ga, err := s.GroupAdvantages(0, g, w.Omega, adv)
		if err != nil {
			t.Fatal(err)
		}
		if ga.Case != BaselineUniform || ga.Baseline != r {
			t.Errorf("uniform %v: %+v", r, ga)
		}
		checkAdv(t, "uniform", adv, []float64{0, 0, 0, 0})
		// Without the fallback: weighted mean (r + r + 10r + 10r)/4 = 5.5r, guard if > 1.
		nf := s
		nf.UniformFallback = false
		ga, _ = nf.GroupAdvantages(0, g, w.Omega, adv)
		if r == 0 && (ga.Case != BaselineWeighted || ga.Baseline != 0) {
			t.Errorf("no fallback, zeros: %+v", ga)
		}
		if r == 1 && (ga.Case != BaselineGuard || ga.Baseline != 1) {
			t.Errorf("no fallback, ones: %+v (want guard → own mean 1)", ga)
		}
	}

	// Binary guard: learner 0 with ω(0,1) = 10: μ̂ = (0 + 1 + 10·(1+1))/4 = 21/4 > 1
	// → replaced by learner 0's own mean (0+1)/2 = 0.5.
	g := group([]float64{0, 1}, []float64{1, 1})
	adv := make([]float64, 4)
	ga, err := s.GroupAdvantages(0, g, w.Omega, adv)
	if err != nil {
		t.Fatal(err)
	}
	den := sampleStd(0, 1, 1, 1) + 1e-6 // std of (0,1,1,1) = sqrt(0.75/3) = 0.5
	if ga.Case != BaselineGuard || ga.Baseline != 0.5 || !near(ga.Std, 0.5, tol) {
		t.Errorf("guard: %+v", ga)
	}
	checkAdv(t, "guard", adv, []float64{-0.5 / den, 0.5 / den, 0.5 / den, 0.5 / den})
	// Guard off: the weighted baseline 21/4 is kept.
	ng := s
	ng.BinaryGuard = false
	ga, _ = ng.GroupAdvantages(0, g, w.Omega, adv)
	if ga.Case != BaselineWeighted || ga.Baseline != 21.0/4 {
		t.Errorf("guard off: %+v", ga)
	}

	// Guard with no own response in the group (unequal counts): plain joint mean.
	g = []Response{{Source: 1, Reward: 1}, {Source: 1, Reward: 0}}
	ga, err = s.GroupAdvantages(0, g, w.Omega, adv[:2])
	if err != nil {
		t.Fatal(err)
	}
	// weighted: 10·(1+0)/2 = 5 > 1 → no self → (1+0)/2.
	if ga.Case != BaselineGuardNoSelf || ga.Baseline != 0.5 {
		t.Errorf("guard without self: %+v", ga)
	}

	// One response: std undefined → denominator 1 + ε; uniform → advantage 0.
	ga, _ = s.GroupAdvantages(0, []Response{{0, 1}}, w.Omega, adv[:1])
	if ga.Denominator != 1+1e-6 || adv[0] != 0 {
		t.Errorf("single response: %+v adv %v", ga, adv[0])
	}
	// Empty group.
	ga, err = s.GroupAdvantages(0, nil, w.Omega, nil)
	if err != nil || ga.Case != BaselineEmpty {
		t.Errorf("empty group: %+v %v", ga, err)
	}
}

// Unequal counts per source (a failed sample): the mean in Eq 7 runs over every
// response present.
func TestAdvantagesUnequalCounts(t *testing.T) {
	s := MustPreset("hacpo")
	w := OmegaMatrix{{1, 0.5}, {2, 1}}
	g := group([]float64{1, 0, 1}, []float64{1, 0}) // agent 1 lost 1 of its 3 samples
	// learner 0: μ̂ = (1+0+1 + 0.5·(1+0)) / 5 = 2.5/5 = 0.5; std of (1,0,1,1,0).
	mu := (1 + 0 + 1 + 0.5*(1+0)) / 5.0
	den := sampleStd(1, 0, 1, 1, 0) + 1e-6
	adv, err := s.Advantages(0, g, w.Omega)
	if err != nil {
		t.Fatal(err)
	}
	checkAdv(t, "unequal", adv, []float64{(1 - mu) / den, -mu / den, (1 - mu) / den, (1 - mu) / den, -mu / den})
}

// Three agents of three capabilities, by hand: P̂ = (0.25, 0.5, 0.75), G = 2.
func TestAdvantagesThreeAgentsByHand(t *testing.T) {
	cs := DefaultCapability()
	tr := newTracker(t, 3, cs)
	// One step whose accuracies are 1/4, 2/4, 3/4.
	update(t, tr, []float64{1, 0, 0, 0}, []float64{1, 1, 0, 0}, []float64{1, 1, 1, 0})
	// ω(0,1) = 0.25/0.5 = 0.5, ω(0,2) = 0.25/0.75 = 1/3, ω(1,0) = 2, ω(1,2) = 2/3,
	// ω(2,0) = 3, ω(2,1) = 1.5.
	for _, c := range []struct {
		a, b int
		w    float64
	}{{0, 1, 0.5}, {0, 2, 0.25 / 0.75}, {1, 0, 2}, {1, 2, 0.5 / 0.75}, {2, 0, 3}, {2, 1, 1.5}} {
		if got := tr.Omega(c.a, c.b); !near(got, c.w, tol) {
			t.Errorf("ω(%d,%d) = %v, want %v", c.a, c.b, got, c.w)
		}
	}
	// Prompt group: agent 0 → (1, 0), agent 1 → (1, 0), agent 2 → (1, 1).
	g := group([]float64{1, 0}, []float64{1, 0}, []float64{1, 1})
	// Joint std of (1,0,1,0,1,1): mean 2/3; Σ(x−m)² = 4·(1/3)² + 2·(2/3)² = 4/3; /5 → 4/15.
	den := math.Sqrt(4.0/15.0) + 1e-6
	s := MustPreset("hacpo")

	// Learner 0: μ̂ = (1 + 0 + 0.5·(1+0) + (1/3)·(1+1)) / 6 = (1 + 0.5 + 2/3)/6 = 13/36.
	mu0 := (1 + 0.5 + 2.0/3.0) / 6
	if !near(mu0, 13.0/36.0, tol) {
		t.Fatal(mu0)
	}
	// Learner 1: μ̂ = (2·(1+0) + 1 + 0 + (2/3)·2) / 6 = (3 + 4/3)/6 = 13/18.
	mu1 := (2.0 + 1 + 4.0/3.0) / 6
	// Learner 2: μ̂ = (3·1 + 1.5·1 + 2)/6 = 6.5/6 > 1 → guard → own mean (1+1)/2 = 1.
	mu2 := 1.0
	for k, mu := range []float64{mu0, mu1, mu2} {
		adv, err := s.Advantages(k, g, tr.Omega)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float64, 6)
		for i, r := range []float64{1, 0, 1, 0, 1, 1} {
			want[i] = (r - mu) / den
		}
		checkAdv(t, "learner "+string(rune('0'+k)), adv, want)
	}

	// The update weights of learner 0's cross samples are ω(src, 0): from agent 1
	// ω(1,0) = 2 (stronger, amplified), from agent 2 ω(2,0) = 3.
	// With s = exp(−0.1) inside [0.8, 1] at m = 0, α = 1, a cross sample from agent 2
	// with advantage A contributes −s·s·3·A and has gradient −s²·3·A.
	adv0, _ := s.Advantages(0, g, tr.Omega)
	A := adv0[4] // agent 2's first response (reward 1)
	sr := math.Exp(-0.1)
	tm := s.CrossTerm(0, -1.1, -1.0, A, tr.Omega(2, 0))
	if !near(tm.Value, -sr*sr*3*A, tol) || !near(tm.Grad, -sr*sr*3*A, tol) || tm.Clip != Inside {
		t.Errorf("cross term from agent 2 to learner 0: %+v, want value = grad = %v", tm, -sr*sr*3*A)
	}
	// And from agent 0 to learner 2, ω(0,2) = 1/3 attenuates it.
	adv2, _ := s.Advantages(2, g, tr.Omega)
	A = adv2[1] // agent 0's second response (reward 0): (0 − 1)/den
	tm = s.CrossTerm(0, -1.1, -1.0, A, tr.Omega(0, 2))
	if !near(tm.Value, -sr*sr*(1.0/3.0)*A, tol) {
		t.Errorf("cross term from agent 0 to learner 2: %+v", tm)
	}
}

func TestAdvantagesSingleAgentMethods(t *testing.T) {
	g := group([]float64{1, 0, 1, 1}, []float64{0, 0}) // agent 1's responses must be ignored
	for _, name := range []string{"gspo", "gspo2x", "grpo"} {
		s := MustPreset(name)
		adv, err := s.Advantages(0, g, nil)
		if err != nil {
			t.Fatal(err)
		}
		// GRPO/GSPO group advantage over the learner's own 4: mean 0.75, std sqrt(0.75/3) = 0.5.
		den := 0.5 + 1e-6
		checkAdv(t, name, adv, []float64{0.25 / den, -0.75 / den, 0.25 / den, 0.25 / den, 0, 0})
	}
	// Naive: plain joint mean and std of all 6, no ω needed.
	s := MustPreset("naive")
	adv, err := s.Advantages(0, g, nil)
	if err != nil {
		t.Fatal(err)
	}
	mu, den := 3.0/6, sampleStd(1, 0, 1, 1, 0, 0)+1e-6
	checkAdv(t, "naive", adv, []float64{(1 - mu) / den, -mu / den, (1 - mu) / den, (1 - mu) / den, -mu / den, -mu / den})
}

func TestAdvantagesErrors(t *testing.T) {
	s := MustPreset("hacpo")
	w := OmegaMatrix{{1, 1}, {1, 1}}
	cases := []struct {
		name string
		g    []Response
		om   OmegaFunc
		want string
	}{
		{"nan reward", []Response{{0, math.NaN()}, {1, 0}}, w.Omega, "reward"},
		{"negative source", []Response{{-1, 1}, {0, 0}}, w.Omega, "source"},
		{"unknown agent", []Response{{0, 1}, {5, 0}}, w.Omega, "ω(0, 5)"},
		{"no omega", []Response{{0, 1}, {1, 0}}, nil, "no ω"},
	}
	for _, c := range cases {
		_, err := s.Advantages(0, c.g, c.om)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.want)
		}
	}
	if _, err := s.GroupAdvantages(0, []Response{{0, 1}}, w.Omega, nil); err == nil {
		t.Error("short output slice: want an error")
	}
	out, err := s.BatchAdvantages(0, [][]Response{group([]float64{1, 0}, []float64{1, 1}), group([]float64{0, 0}, []float64{0, 0})}, w.Omega)
	if err != nil || len(out) != 2 || len(out[0]) != 4 || out[1][0] != 0 {
		t.Errorf("BatchAdvantages: %v %v", out, err)
	}
}
