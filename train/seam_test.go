package train

import (
	"context"
	"testing"

	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/hacpo"
	"github.com/hacrl/hacrl/model"
)

// TestAdvantageSignThroughTheEngine checks the seam between the algorithm and
// the engine: one update on a self sample with a positive advantage raises
// that response's log-prob, and with a negative advantage lowers it — for
// the GSPO self term and for an unclamped HACPO cross term.
func TestAdvantageSignThroughTheEngine(t *testing.T) {
	ctx := context.Background()
	b := backend.Must(backend.Sequential)
	seq := model.Sequence{Prompt: []int{1, 2, 3}, Response: []int{4, 5, 6, 7}}
	for _, tc := range []struct {
		name string
		self bool
		adv  float64
	}{{"self positive", true, 1}, {"self negative", true, -1}, {"cross positive", false, 1}, {"cross negative", false, -1}} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := model.New(b, model.Config{Family: "gpt", Vocab: 11, Dim: 16, Layers: 1, Heads: 2, MaxSeq: 16, BOS: -1, EOS: -1}, 3)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := model.NewTrainer(m, model.OptimizerConfig{LearningRate: 1e-2, MaxGradNorm: 1})
			if err != nil {
				t.Fatal(err)
			}
			sc, err := m.Score(ctx, []model.Sequence{seq}, false)
			if err != nil {
				t.Fatal(err)
			}
			before := hacpo.MeanLogProb(sc.LogProbs[0])
			s := hacpo.MustPreset("hacpo")
			sample := hacpo.Sample{Self: tc.self, Source: 0, Advantage: tc.adv, Omega: 1, OldMeanLogProb: before}
			if tc.self {
				sample.OldLogProbs = sc.LogProbs[0]
				s.KLCoef = 0
			} else {
				sample.Source = 1
				s.Alpha = 0
			}
			m0 := 0
			if !tc.self {
				// The ratio is 1 here, inside [L_m, 1] for every m.
				m0 = 3
			}
			_, grad, err := s.MiniBatchLoss(m0, []hacpo.Sample{sample}, sc.LogProbs)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tr.Accumulate(ctx, []model.Sequence{seq}, grad); err != nil {
				t.Fatal(err)
			}
			if _, err := tr.Apply(ctx, 0); err != nil {
				t.Fatal(err)
			}
			sc2, err := m.Score(ctx, []model.Sequence{seq}, false)
			if err != nil {
				t.Fatal(err)
			}
			after := hacpo.MeanLogProb(sc2.LogProbs[0])
			if (after > before) != (tc.adv > 0) {
				t.Errorf("advantage %+v: mean log-prob %.5f → %.5f", tc.adv, before, after)
			}
		})
	}
}
