package hacpo

import (
	"math"
	"math/rand/v2"
	"testing"
)

// meanSE returns the sample mean of xs and its standard error sd/√n.
func meanSE(xs []float64) (mean, se float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	ss := 0.0
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss/float64(len(xs)-1)) / math.Sqrt(float64(len(xs)))
}

// Theorem 4.1 and Corollary 4.2 by Monte Carlo. Three agents with success
// probabilities p_j(q) = d(q)·base_j, where the prompt difficulty d(q) ~ U(0.2, 1)
// varies from prompt to prompt, so the true capability ratio
// ω(k, j) = E[R_k]/E[R_j] = base_k/base_j is the same for every prompt (Assumption D.1).
//
// Eq 7 alone (no uniform fallback, no binary guard, no std) is then an unbiased
// estimate of p_k(q): E[μ̂^(k)] = (1/nG) Σ_j G·ω(k,j)·p_j = (1/n) Σ_j p_k = p_k, and the
// advantage of k's own responses, R − μ̂^(k), has mean 0. With a wrong ω the bias is
// measurable and equals its predicted value.
//
// Tolerances: each check compares a mean over M = 200,000 prompts with its own
// standard error (SE, from the sample sd of the per-prompt quantity). "Unbiased"
// means |mean| < 4 SE (a false alarm has probability ≈ 6e-5 for a fresh seed; the
// seed is fixed, so the test is deterministic); "biased" means |mean| > 20 SE and
// within 4 SE of the predicted bias.
func TestMonteCarloUnbiasedBaseline(t *testing.T) {
	const (
		n = 3
		G = 8
		M = 200_000
	)
	base := []float64{0.25, 0.5, 0.9}
	trueW := make(OmegaMatrix, n)
	for k := range trueW {
		trueW[k] = make([]float64, n)
		for j := range trueW[k] {
			trueW[k][j] = base[k] / base[j]
		}
	}
	s := MustPreset("hacpo")
	s.UniformFallback, s.BinaryGuard, s.NormalizeStd = false, false, false

	// Wrong ω: 1 everywhere (the plain mean, "no-adv"), and the true ω × 1.5 off the diagonal.
	ones := OmegaMatrix{{1, 1, 1}, {1, 1, 1}, {1, 1, 1}}
	inflated := make(OmegaMatrix, n)
	for k := range inflated {
		inflated[k] = append([]float64{}, trueW[k]...)
		for j := range inflated[k] {
			if j != k {
				inflated[k][j] *= 1.5
			}
		}
	}
	const meanD = (0.2 + 1.0) / 2 // E[d]

	rng := rand.New(rand.NewPCG(2026, 3))
	g := make([]Response, n*G)
	adv := make([]float64, n*G)
	type acc struct{ baseErr, ownAdv, onesErr, inflErr []float64 }
	accs := make([]acc, n)
	for q := 0; q < M; q++ {
		d := 0.2 + 0.8*rng.Float64()
		for j := 0; j < n; j++ {
			for i := 0; i < G; i++ {
				r := 0.0
				if rng.Float64() < d*base[j] {
					r = 1
				}
				g[j*G+i] = Response{Source: j, Reward: r}
			}
		}
		for k := 0; k < n; k++ {
			pk := d * base[k]
			ga, err := s.GroupAdvantages(k, g, trueW.Omega, adv)
			if err != nil {
				t.Fatal(err)
			}
			own := 0.0
			for i := 0; i < G; i++ {
				own += adv[k*G+i]
			}
			accs[k].baseErr = append(accs[k].baseErr, ga.Baseline-pk)
			accs[k].ownAdv = append(accs[k].ownAdv, own/G)
			ga1, _ := s.GroupAdvantages(k, g, ones.Omega, adv)
			accs[k].onesErr = append(accs[k].onesErr, ga1.Baseline-pk)
			ga2, _ := s.GroupAdvantages(k, g, inflated.Omega, adv)
			accs[k].inflErr = append(accs[k].inflErr, ga2.Baseline-pk)
		}
	}
	for k := 0; k < n; k++ {
		m, se := meanSE(accs[k].baseErr)
		t.Logf("learner %d: E[μ̂ − p_k] = %+.5f (SE %.5f) with the true ω", k, m, se)
		if math.Abs(m) > 4*se {
			t.Errorf("learner %d: baseline bias %v exceeds 4 SE = %v with the true ω (Theorem 4.1)", k, m, 4*se)
		}
		m, se = meanSE(accs[k].ownAdv)
		t.Logf("learner %d: E[A] = %+.5f (SE %.5f) over its own responses", k, m, se)
		if math.Abs(m) > 4*se {
			t.Errorf("learner %d: mean advantage %v exceeds 4 SE = %v (Corollary 4.2)", k, m, 4*se)
		}

		// ω = 1: E[μ̂] = mean_j p_j → bias E[d]·(mean(base) − base_k).
		want := meanD * ((base[0]+base[1]+base[2])/3 - base[k])
		m, se = meanSE(accs[k].onesErr)
		t.Logf("learner %d: ω = 1: bias %+.5f (SE %.5f), predicted %+.5f", k, m, se, want)
		if math.Abs(m) < 20*se || math.Abs(m-want) > 4*se {
			t.Errorf("learner %d: ω = 1: bias %v (SE %v), want ≈ %v and clearly non-zero", k, m, se, want)
		}
		// ω × 1.5 off the diagonal: bias = E[d]·base_k·(n−1)/n·0.5.
		want = meanD * base[k] * float64(n-1) / n * 0.5
		m, se = meanSE(accs[k].inflErr)
		t.Logf("learner %d: ω × 1.5: bias %+.5f (SE %.5f), predicted %+.5f", k, m, se, want)
		if math.Abs(m) < 20*se || math.Abs(m-want) > 4*se {
			t.Errorf("learner %d: ω × 1.5: bias %v (SE %v), want ≈ %v and clearly non-zero", k, m, se, want)
		}
	}
}
