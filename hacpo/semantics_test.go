package hacpo

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

// original returns s with the original fork's semantics.
func original(s Settings) Settings {
	s.Semantics = SemanticsOriginal
	return s
}

// verl's Karmarkar–Karp partition, worked by hand (doc.go decision 24). Items
// sorted by (length, index) form groups of k; the state with the largest spread
// (ties: the larger largest set) is merged first, largest set with smallest.
func TestBalancedPartitionsByHand(t *testing.T) {
	for _, c := range []struct {
		name    string
		lengths []int
		k       int
		want    [][]int
	}{
		// Groups {0,1} → sets {1:2},{0:1} and {2,3} → {3:4},{2:3}, both spread 1; the
		// second has the larger largest set and pops first: {3}+{0} = 5, {2}+{1} = 5.
		// Equal sums and counts: {2,1} < {3,0} by their first index, so {3,0} leads.
		{"pairs", []int{1, 2, 3, 4}, 2, [][]int{{0, 3}, {1, 2}}},
		// {5:1},{0:10} has spread 9 and merges first, with {4},{3} (spread 0, larger
		// first set than {2},{1} by index): {0,3} = 11, {5,4} = 2; then with {2},{1}:
		// {0,3,1} = 12, {5,4,2} = 3. The 10 has to share with two 1s.
		{"one long", []int{10, 1, 1, 1, 1, 1}, 2, [][]int{{0, 1, 3}, {2, 4, 5}}},
		// {1:1},{3:2} and {2:3},{0:4}, spread 1 each; {0:4} leads: {0}+{1} = 5,
		// {2}+{3} = 5, and {2,3} leads {0,1} by its first index.
		{"mixed", []int{4, 1, 3, 2}, 2, [][]int{{2, 3}, {0, 1}}},
		// All equal: the states merge from the highest indices down,
		// {7}+{4}, {6}+{5}, then + {2}, {3}, then + {0}, {1}.
		{"equal", []int{5, 5, 5, 5, 5, 5, 5, 5}, 2, [][]int{{0, 2, 4, 7}, {1, 3, 5, 6}}},
		{"equal k=3", []int{7, 7, 7, 7, 7, 7}, 3, [][]int{{0, 5}, {1, 4}, {2, 3}}},
		{"one rank", []int{3, 1, 2}, 1, [][]int{{0, 1, 2}}},
	} {
		if got := BalancedPartitions(c.lengths, c.k); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// refs builds SeqRefs from (source, index) pairs.
func refs(pairs ...int) []SeqRef {
	out := make([]SeqRef, len(pairs)/2)
	for i := range out {
		out[i] = SeqRef{pairs[2*i], pairs[2*i+1]}
	}
	return out
}

// The original membership on cases small enough to follow by hand (partitions
// from TestBalancedPartitionsByHand): the second agent's cross samples come
// first, so they train under the loosest bound 0.8, where V1 puts them last.
func TestPlanBalancedByHand(t *testing.T) {
	hacpo, gspo := MustPreset("hacpo"), MustPreset("gspo")
	for _, c := range []struct {
		name      string
		s         Settings
		learner   int
		lengths   [][]int
		mb, ranks int
		want      [][]SeqRef // per mini-batch
		lower     []float64
	}{
		// Joint lengths 5×8 → partitions {0,2,4,7} {1,3,5,6}. Learner 0: rank 0 holds
		// a0#0 a0#2 a1#0 a1#3, rank 1 a0#1 a0#3 a1#1 a1#2; two per rank per update.
		{"equal, learner 0", hacpo, 0, [][]int{{5, 5, 5, 5}, {5, 5, 5, 5}}, 4, 2,
			[][]SeqRef{refs(0, 0, 0, 2, 0, 1, 0, 3), refs(1, 0, 1, 3, 1, 1, 1, 2)}, []float64{0, 0.825}},
		// Learner 1: the order rotated by agent 0's 4 responses (the half swap): rank 0
		// holds {1,3,5,6}, rank 1 {0,2,4,7}, so m = 0 is all of agent 0's responses.
		{"equal, learner 1", hacpo, 1, [][]int{{5, 5, 5, 5}, {5, 5, 5, 5}}, 4, 2,
			[][]SeqRef{refs(0, 1, 0, 3, 0, 0, 0, 2), refs(1, 1, 1, 2, 1, 0, 1, 3)}, []float64{0.8, 0}},
		// Lengths a0 = (4, 1), a1 = (3, 2) → partitions {2,3} {0,1}: rank 0 holds agent
		// 1's two responses, rank 1 agent 0's; one per rank per update, so every
		// mini-batch is one self and one cross sequence, for either learner.
		{"mixed, learner 0", hacpo, 0, [][]int{{4, 1}, {3, 2}}, 2, 2,
			[][]SeqRef{refs(1, 0, 0, 0), refs(1, 1, 0, 1)}, []float64{0.8, 0.825}},
		{"mixed, learner 1", hacpo, 1, [][]int{{4, 1}, {3, 2}}, 2, 2,
			[][]SeqRef{refs(0, 0, 1, 0), refs(0, 1, 1, 1)}, []float64{0.8, 0.825}},
		// A single-agent method balances the learner's own responses only: (3, 2)
		// is one group of k = 2, so each rank holds one and the step is one update.
		{"gspo, own only", gspo, 1, [][]int{{4, 1}, {3, 2}}, 2, 2,
			[][]SeqRef{refs(1, 0, 1, 1)}, []float64{0}},
		// Unequal per-rank pieces: 8 sequences on 2 ranks, 6 per update (3 per rank):
		// the last update takes the one left on each rank.
		{"short last", hacpo, 0, [][]int{{5, 5, 5, 5}, {5, 5, 5, 5}}, 6, 2,
			[][]SeqRef{refs(0, 0, 0, 2, 1, 0, 0, 1, 0, 3, 1, 1), refs(1, 3, 1, 2)}, []float64{0.8, 0.825}},
	} {
		p, err := c.s.PlanBalanced(c.learner, c.lengths, c.mb, c.ranks)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if p.Updates() != len(c.want) || p.Ranks != c.ranks {
			t.Fatalf("%s: %d updates on %d ranks, want %d:\n%s", c.name, p.Updates(), p.Ranks, len(c.want), p)
		}
		for m, want := range c.want {
			mb := p.MiniBatches[m]
			got := p.Refs(m)
			self := 0
			for _, r := range want {
				if r.Source == c.learner {
					self++
				}
			}
			if !reflect.DeepEqual(got, want) || mb.M != m || mb.Self != self || mb.Cross != len(want)-self || !near(mb.CrossLower, c.lower[m], 1e-15) {
				t.Errorf("%s m=%d: %v %+v, want %v (self %d, lower %v)", c.name, m, got, mb, want, self, c.lower[m])
			}
		}
	}
}

// PlanStep is PlanMiniBatches under V1 ("" too) and PlanBalanced on
// OriginalRanks under the original semantics; the V1 plan ignores lengths.
func TestPlanStepDispatch(t *testing.T) {
	lengths := make([][]int, 2)
	for a := range lengths {
		for i := range 32 {
			lengths[a] = append(lengths[a], 1+(7*i+3*a)%11)
		}
	}
	for _, sem := range []Semantics{"", SemanticsV1} {
		s := MustPreset("hacpo")
		s.Semantics = sem
		got, err := s.PlanStep(1, lengths, 16)
		want, _ := s.PlanMiniBatches(1, []int{32, 32}, 16)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("semantics %q: %v\n%s\nwant\n%s", sem, err, got, want)
		}
	}
	s := original(MustPreset("hacpo"))
	got, err := s.PlanStep(1, lengths, 16)
	want, _ := s.PlanBalanced(1, lengths, 16, OriginalRanks)
	if err != nil || !reflect.DeepEqual(got, want) || got.Ranks != 8 || got.Updates() != 4 {
		t.Errorf("original: %v\n%s\nwant\n%s", err, got, want)
	}
	// Every sequence exactly once, and the mini-batches account for all of them.
	seen := map[SeqRef]bool{}
	for _, r := range got.Order {
		if seen[r] {
			t.Fatalf("%v twice", r)
		}
		seen[r] = true
	}
	if len(seen) != 64 {
		t.Errorf("%d sequences", len(seen))
	}
	if out := got.String(); !strings.Contains(out, "(balanced over 8 ranks)") || !strings.Contains(out, " in ") {
		t.Errorf("String():\n%s", out)
	}
}

func TestPlanBalancedErrors(t *testing.T) {
	s := MustPreset("hacpo")
	for _, c := range []struct {
		name      string
		learner   int
		lengths   [][]int
		mb, ranks int
		want      string
	}{
		{"learner", 2, [][]int{{1}, {1}}, 2, 2, "out of range"},
		{"ranks", 0, [][]int{{1}, {1}}, 2, 0, "ranks must be"},
		{"mini-batch", 0, [][]int{{1, 1}, {1, 1}}, 3, 2, "multiple of the 2 ranks"},
		{"batch", 0, [][]int{{1, 1}, {1}}, 2, 2, "3 sequences over 2 ranks"},
		{"length", 0, [][]int{{1, 0}, {1, 1}}, 2, 2, "agent 0 response 1 has length 0"},
	} {
		if _, err := s.PlanBalanced(c.learner, c.lengths, c.mb, c.ranks); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
	if p, err := s.PlanBalanced(0, [][]int{{}, {}}, 2, 2); err != nil || p.Updates() != 0 {
		t.Errorf("empty: %+v %v", p, err)
	}
	bad := s
	bad.Semantics = "orig"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), `semantics must be "v1" or "original", got "orig"`) {
		t.Errorf("Validate: %v", err)
	}
}

// Aggregation by hand. Log-probs 0 everywhere; self sample A has 1 token with
// reference log-prob ln 2 (k3 = e^{ln 2} − ln 2 − 1 = 1 − ln 2, dk3/dlp = 1 − 2 =
// −1), self sample B has 3 tokens at the reference (k3 = 0, slope 0), and one
// cross sample; every advantage is 0, so only the KL remains (coefficient 1).
//
//	V1:       KL = (1/B) Σ_self token-mean = (1 − ln 2)/3;  dL/dlp_A = −1/1·1/3
//	original: KL = Σ_self k3 / self tokens  = (1 − ln 2)/4;  dL/dlp_A = −1/4
//
// GRPO, no KL, lp = old (ratio 1, token term −A, slope −A): A has 1 token and
// advantage 1, B 3 tokens and advantage −1.
//
//	V1:       policy = (1/2)(−1 + 1) = 0;         grads A −1·1·½ = −½, B +1·⅓·½ = +⅙
//	original: policy = (−1·1 + 1·3)/4 = ½;        grads A −¼, B +¼
func TestMiniBatchLossTokenMeanByHand(t *testing.T) {
	ln2 := math.Ln2
	klSamples := []Sample{
		{Self: true, OldMeanLogProb: 0, RefLogProbs: []float32{float32(ln2)}},
		{Self: true, OldMeanLogProb: 0, RefLogProbs: []float32{0, 0, 0}},
		{Source: 1, OldMeanLogProb: 0, Omega: 1},
	}
	klLPs := [][]float64{{0}, {0, 0, 0}, {0, 0}}
	grpoSamples := []Sample{
		{Self: true, Advantage: 1, OldLogProbs: []float32{0}},
		{Self: true, Advantage: -1, OldLogProbs: []float32{0, 0, 0}},
	}
	grpoLPs := [][]float64{{0}, {0, 0, 0}}
	hacpo, grpo := MustPreset("hacpo"), MustPreset("grpo")
	hacpo.KLCoef, grpo.KLCoef = 1, 0
	// The reference log-prob is stored as float32: k3 at d = float32(ln 2).
	d := float64(float32(ln2))
	k3, dk3 := math.Exp(d)-d-1, 1-math.Exp(d)
	for _, c := range []struct {
		name      string
		s         Settings
		samples   []Sample
		lps       [][]float64
		policy    float64
		kl        float64
		grad      [][]float64
		crossZero bool
	}{
		{"kl v1", hacpo, klSamples, klLPs, 0, k3 / 3, [][]float64{{dk3 / 3}, {0, 0, 0}, {0, 0}}, true},
		{"kl original", original(hacpo), klSamples, klLPs, 0, k3 / 4, [][]float64{{dk3 / 4}, {0, 0, 0}, {0, 0}}, true},
		{"grpo v1", grpo, grpoSamples, grpoLPs, 0, 0, [][]float64{{-0.5}, {1.0 / 6, 1.0 / 6, 1.0 / 6}}, false},
		{"grpo original", original(grpo), grpoSamples, grpoLPs, 0.5, 0, [][]float64{{-0.25}, {0.25, 0.25, 0.25}}, false},
	} {
		grad := make([][]float64, len(c.lps))
		for b := range grad {
			grad[b] = make([]float64, len(c.lps[b]))
		}
		l, err := c.s.MiniBatchLoss64(0, c.samples, c.lps, grad)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !near(l.Policy, c.policy, 1e-15) || !near(l.KL, c.kl, 1e-15) || !near(l.Total, c.policy+c.s.KLCoef*c.kl, 1e-15) {
			t.Errorf("%s: policy %v KL %v total %v, want %v %v", c.name, l.Policy, l.KL, l.Total, c.policy, c.kl)
		}
		for b := range grad {
			for tk := range grad[b] {
				if !near(grad[b][tk], c.grad[b][tk], 1e-15) {
					t.Errorf("%s: grad[%d][%d] = %v, want %v", c.name, b, tk, grad[b][tk], c.grad[b][tk])
				}
			}
		}
		// The per-sequence statistics do not depend on the semantics.
		if c.crossZero && (!near(l.Stats.SelfKLMean(), k3/2, 1e-15) || l.Stats.CrossSeqs != 1) {
			t.Errorf("%s: stats %+v", c.name, l.Stats)
		}
	}
}

// Under the original semantics the sequence-level policy term is unchanged (a
// sequence mean, as mapo_clip forces), and a mini-batch without self samples has
// KL 0, not 0/0.
func TestMiniBatchLossOriginalSequencePolicy(t *testing.T) {
	s := MustPreset("hacpo")
	s.KLCoef = 0
	samples := []Sample{
		{Self: true, Advantage: 0.7, OldMeanLogProb: -1.05},
		{Source: 1, Advantage: -0.4, OldMeanLogProb: -0.9, Omega: 1.3},
		{Source: 1, Advantage: 1.2, OldMeanLogProb: -1.1, Omega: 1.3},
	}
	lps := [][]float32{{-1, -1.1}, {-0.95, -0.9, -1}, {-1.2}}
	lv, gv, err := s.MiniBatchLoss(1, samples, lps)
	if err != nil {
		t.Fatal(err)
	}
	lo, goo, err := original(s).MiniBatchLoss(1, samples, lps)
	if err != nil {
		t.Fatal(err)
	}
	if lv.Total != lo.Total || lv.Policy != lo.Policy || !reflect.DeepEqual(gv, goo) || lv.Total == 0 {
		t.Errorf("v1 %+v / original %+v", lv, lo)
	}
	s.KLCoef = 0.001
	cross := []Sample{samples[1], samples[2]}
	l, g, err := original(s).MiniBatchLoss(0, cross, lps[1:])
	if err != nil || l.KL != 0 || math.IsNaN(l.Total) || math.IsNaN(float64(g[0][0])) {
		t.Errorf("cross only: %+v %v %v", l, g, err)
	}
}
