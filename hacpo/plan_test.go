package hacpo

import (
	"strings"
	"testing"
)

// The paper's sizes: 128 prompts × 8 responses per agent, mini-batch 64 × 8 = 512
// sequences. HACPO (n = 2): 4 updates per learner, self in m = 0, 1 and cross in
// m = 2, 3 with bounds 0.85 and 0.875 (spec §6.4 item 6). GSPO: 2 updates. GSPO×2:
// 2·8 = 16 responses per prompt → 2048 sequences → 4 updates, as many as HACPO.
func TestPlanPaperSizes(t *testing.T) {
	s := MustPreset("hacpo")
	p, err := s.PlanMiniBatches(1, []int{1024, 1024}, 512)
	if err != nil {
		t.Fatal(err)
	}
	if p.Updates() != 4 || p.Sequences() != 2048 {
		t.Fatalf("plan: %d updates, %d sequences", p.Updates(), p.Sequences())
	}
	wantLower := []float64{0, 0, 0.85, 0.875}
	for m, mb := range p.MiniBatches {
		self := m < 2
		if mb.M != m || mb.Len() != 512 || (mb.Self == 512) != self || (mb.Cross == 512) != !self || !near(mb.CrossLower, wantLower[m], 1e-15) {
			t.Errorf("m=%d: %+v", m, mb)
		}
		for _, r := range p.Refs(m) {
			if (r.Source == 1) != self {
				t.Fatalf("m=%d holds %+v", m, r)
			}
		}
	}
	if p.Refs(0)[0] != (SeqRef{1, 0}) || p.Refs(2)[0] != (SeqRef{0, 0}) || p.Refs(3)[511] != (SeqRef{0, 1023}) {
		t.Errorf("order: %v %v %v", p.Refs(0)[0], p.Refs(2)[0], p.Refs(3)[511])
	}
	out := p.String()
	if !strings.Contains(out, "4 updates") || !strings.Contains(out, "m=3: 512 sequences (self 0, cross 512, cross lower bound 0.875): agent0[512:1024]") {
		t.Errorf("String():\n%s", out)
	}

	g := MustPreset("gspo")
	p, _ = g.PlanMiniBatches(0, []int{1024, 1024}, 512) // the other agent is ignored
	if p.Updates() != 2 || p.Sequences() != 1024 || p.MiniBatches[1].CrossLower != 0 {
		t.Errorf("gspo: %+v", p.MiniBatches)
	}
	g2 := MustPreset("gspo2x")
	p, _ = g2.PlanMiniBatches(0, []int{g2.ResponsesMultiplier * 8 * 128}, 512)
	if p.Updates() != 4 {
		t.Errorf("gspo2x: %d updates, want 4", p.Updates())
	}
}

// n = 3, learner 1: self first, then agent 0, then agent 2; unequal counts; the last
// mini-batch is smaller.
func TestPlanThreeAgents(t *testing.T) {
	s := MustPreset("hacpo")
	p, err := s.PlanMiniBatches(1, []int{3, 2, 4}, 4)
	if err != nil {
		t.Fatal(err)
	}
	want := []SeqRef{{1, 0}, {1, 1}, {0, 0}, {0, 1}, {0, 2}, {2, 0}, {2, 1}, {2, 2}, {2, 3}}
	if len(p.Order) != len(want) {
		t.Fatalf("order %v", p.Order)
	}
	for i := range want {
		if p.Order[i] != want[i] {
			t.Fatalf("order %v, want %v", p.Order, want)
		}
	}
	// Mini-batches of 4, 4, 1.
	sizes := []int{4, 4, 1}
	selfs := []int{2, 0, 0}
	for m, mb := range p.MiniBatches {
		if mb.Len() != sizes[m] || mb.Self != selfs[m] || mb.Self+mb.Cross != mb.Len() || mb.CrossLower != s.CrossLower(m) {
			t.Errorf("m=%d: %+v", m, mb)
		}
	}
	// Deterministic: the same inputs give the same plan.
	q, _ := s.PlanMiniBatches(1, []int{3, 2, 4}, 4)
	if q.String() != p.String() {
		t.Error("plan is not deterministic")
	}
	// Errors.
	for _, c := range []struct {
		learner int
		counts  []int
		size    int
	}{{3, []int{1, 1, 1}, 4}, {0, []int{1, -1}, 4}, {0, []int{1, 1}, 0}} {
		if _, err := s.PlanMiniBatches(c.learner, c.counts, c.size); err == nil {
			t.Errorf("%+v: want an error", c)
		}
	}
	// Nothing to train on: no mini-batches.
	p, err = s.PlanMiniBatches(0, []int{0, 0}, 4)
	if err != nil || p.Updates() != 0 {
		t.Errorf("empty plan: %+v %v", p, err)
	}
}
