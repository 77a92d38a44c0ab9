package hacpo

import (
	"math/rand/v2"
	"testing"
)

// TestOnPolicyGRPOEqualsGSPO: on an update whose policy is still the
// sampling policy (every ratio exactly 1), GRPO's token-level and GSPO's
// sequence-level terms give the same loss and the same per-token gradient —
// −A/(B·|y|) for every token — so the two methods can differ only from a
// step's second mini-batch on. (A run with one mini-batch per step cannot
// tell them apart.)
func TestOnPolicyGRPOEqualsGSPO(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var samples []Sample
	var lps [][]float32
	for range 6 {
		n := 3 + r.IntN(6)
		lp := make([]float32, n)
		for i := range lp {
			lp[i] = float32(-r.Float64() * 3)
		}
		samples = append(samples, Sample{Self: true, Advantage: r.NormFloat64(), OldMeanLogProb: MeanLogProb(lp), OldLogProbs: lp})
		lps = append(lps, lp)
	}
	grpo, gspo := MustPreset("grpo"), MustPreset("gspo")
	grpo.KLCoef, gspo.KLCoef = 0, 0
	lg, gg, err := grpo.MiniBatchLoss(0, samples, lps)
	if err != nil {
		t.Fatal(err)
	}
	ls, gs, err := gspo.MiniBatchLoss(0, samples, lps)
	if err != nil {
		t.Fatal(err)
	}
	if d := lg.Total - ls.Total; d > 1e-12 || d < -1e-12 {
		t.Errorf("loss GRPO %v, GSPO %v", lg.Total, ls.Total)
	}
	for b := range gg {
		want := -samples[b].Advantage / float64(len(samples)*len(lps[b]))
		for i := range gg[b] {
			if d := float64(gg[b][i]) - float64(gs[b][i]); d > 1e-7 || d < -1e-7 {
				t.Fatalf("sequence %d token %d: GRPO %v, GSPO %v", b, i, gg[b][i], gs[b][i])
			}
			if d := float64(gs[b][i]) - want; d > 1e-7 || d < -1e-7 {
				t.Fatalf("sequence %d token %d: gradient %v, want −A/(B·|y|) = %v", b, i, gs[b][i], want)
			}
		}
	}
	// One step later, off-policy, they differ.
	moved := make([][]float32, len(lps))
	for b, lp := range lps {
		moved[b] = make([]float32, len(lp))
		for i, v := range lp {
			moved[b][i] = v + float32(0.3*r.NormFloat64())
		}
	}
	_, gg2, _ := grpo.MiniBatchLoss(1, samples, moved)
	_, gs2, _ := gspo.MiniBatchLoss(1, samples, moved)
	same := true
	for b := range gg2 {
		for i := range gg2[b] {
			if gg2[b][i] != gs2[b][i] {
				same = false
			}
		}
	}
	if same {
		t.Error("off-policy, GRPO and GSPO should differ")
	}
}
