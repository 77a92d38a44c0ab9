package hacpo

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hacrl/hacrl/internal/pyenv"
)

// oracleLoss is one mini-batch of self samples as testdata/loss_oracle.py
// reads it: the settings that matter to verl and TRL and the batch, ragged.
type oracleLoss struct {
	Level          RatioLevel  `json:"level"`
	Rule           SelfRule    `json:"rule"`
	ClipLow        float64     `json:"clip_low"`
	ClipHigh       float64     `json:"clip_high"`
	DualClip       float64     `json:"dual_clip"`
	MaxAbsLogRatio float64     `json:"max_abs_log_ratio"`
	Agg            LossAgg     `json:"agg"`
	AggTokens      int         `json:"agg_tokens"`
	KLEstimator    KLEstimator `json:"kl_estimator"`
	KLCoef         float64     `json:"kl_coef"`
	EntropyCoef    float64     `json:"entropy_coef"`
	LogProbs       [][]float64 `json:"logprobs"`
	Old            [][]float64 `json:"old"`
	Ref            [][]float64 `json:"ref"`
	Entropy        [][]float64 `json:"entropy"`
	Adv            []float64   `json:"adv"`
	Masked         []bool      `json:"masked"`
}

type oracleLossResult struct {
	Policy      float64     `json:"policy"`
	KL          float64     `json:"kl"`
	Total       float64     `json:"total"`
	Grad        [][]float64 `json:"grad"`
	EntropyGrad [][]float64 `json:"entropy_grad"`
}

type oracleAdvantages struct {
	Rewards [][]float64 `json:"rewards"`
	Eps     float64     `json:"eps"`
}

type oracleOverlong struct {
	Length  int     `json:"length"`
	MaxLen  int     `json:"max_len"`
	Buffer  int     `json:"buffer"`
	Penalty float64 `json:"penalty"`
}

// lossCase is a named mini-batch with the settings hacpo evaluates it under.
type lossCase struct {
	name    string
	shape   string // the method and rule, for the tally of clipped units
	s       Settings
	samples []Sample
	lps     [][]float64
	ent     [][]float64
}

// randomSelfBatch draws a mini-batch of self samples whose ratios straddle
// the clip range of s (and, for a few units, the ±10 log-ratio clamp), whose
// reference log-probs reach k3's cap, with every fourth sample masked when
// masked is set (at least one is not).
func randomSelfBatch(rng *rand.Rand, s Settings, masked bool) ([]Sample, [][]float64, [][]float64) {
	const maxT = 12
	B := 3 + rng.IntN(5)
	// The spread of the log-ratios: a token's around the clip range, a
	// sequence's mean around GSPO's narrow one.
	spread := s.SelfClipHigh
	if s.SelfClipHigh > 1 {
		spread = 2 // the cispo preset's weights are clipped at 1 + 4 = 5: e^1.6
	}
	samples := make([]Sample, B)
	lps := make([][]float64, B)
	ent := make([][]float64, B)
	for b := range samples {
		T := 1 + rng.IntN(maxT)
		lp, old, ref, h := make([]float64, T), make([]float32, T), make([]float32, T), make([]float64, T)
		shift := spread * rng.NormFloat64() // the sequence's log-ratio (sequence level)
		if rng.IntN(10) == 0 {
			shift = math.Copysign(10.5+rng.Float64(), rng.NormFloat64()) // outside ±10
		}
		for t := range lp {
			lp[t] = -4 * rng.Float64()
			d := shift + 0.01*spread*rng.NormFloat64()
			if s.RatioLevel == TokenLevel {
				d = spread * rng.NormFloat64()
				if rng.IntN(15) == 0 {
					d = math.Copysign(10+2*rng.Float64(), rng.NormFloat64())
				}
			}
			old[t] = float32(lp[t] - d)
			r := lp[t] + 0.5*rng.NormFloat64()
			if rng.IntN(12) == 0 {
				r = lp[t] + 3 // k3 = e³ − 4 > 10: capped
			}
			ref[t] = float32(r)
			h[t] = 3 * rng.Float64()
		}
		samples[b] = Sample{Self: true, Advantage: 2 * rng.NormFloat64(), OldLogProbs: old, RefLogProbs: ref,
			OldMeanLogProb: MeanLogProb(old), Masked: masked && b%4 == 1}
		lps[b], ent[b] = lp, h
	}
	return samples, lps, ent
}

// oracleLossCases: every loss aggregation × every KL estimator × the self
// rules verl and TRL have (PPO per token, with and without dual clip; GSPO's
// sequence ratio; CISPO per token and per sequence) on the presets that use
// them, with and without masked samples and the entropy bonus.
func oracleLossCases(rng *rand.Rand) []lossCase {
	type shape struct {
		preset string
		edit   func(*Settings)
	}
	shapes := []shape{
		{"grpo", nil},
		{"grpo", func(s *Settings) { s.DualClip = 3 }},
		{"dapo", nil},
		{"dr_grpo", nil},
		{"gspo", nil},
		{"gspo", func(s *Settings) { s.SelfClipLow, s.SelfClipHigh = 0.2, 0.28 }},
		{"hacpo", nil}, // self samples only: GSPO's term
		{"cispo", nil},
		{"cispo", func(s *Settings) { s.RatioLevel = SequenceLevel }},
		{"cispo", func(s *Settings) { s.SelfClipLow, s.SelfClipHigh = 0.2, 0.28 }},
	}
	var cases []lossCase
	i := 0
	for _, sh := range shapes {
		for _, agg := range lossAggs {
			for _, est := range []KLEstimator{KLK1, KLK2, KLK3} {
				s := MustPreset(sh.preset)
				if sh.edit != nil {
					sh.edit(&s)
				}
				s.LossAgg, s.LossAggTokens = agg, 12
				s.KLEstimator, s.KLCoef = est, 0.05
				if i%3 != 0 {
					s.EntropyCoef = 0.01 * float64(i%3)
				}
				masked := i%2 == 1
				samples, lps, ent := randomSelfBatch(rng, s, masked)
				shape := fmt.Sprintf("%s/%s/%s/clip=[%v,%v]/dual=%v", sh.preset, s.RatioLevel, s.SelfRule, s.SelfClipLow, s.SelfClipHigh, s.DualClip)
				name := fmt.Sprintf("%s/%s/%s/masked=%v/entropy=%v", shape, agg, est, masked, s.EntropyCoef)
				cases = append(cases, lossCase{name, shape, s, samples, lps, ent})
				i++
			}
		}
	}
	return cases
}

func (c lossCase) request() oracleLoss {
	s := c.s
	r := oracleLoss{
		Level: s.RatioLevel, Rule: s.SelfRule, ClipLow: s.SelfClipLow, ClipHigh: s.SelfClipHigh,
		DualClip: s.DualClip, MaxAbsLogRatio: s.MaxAbsLogRatio, Agg: s.Aggregation(), AggTokens: s.LossAggTokens,
		KLEstimator: s.KLEstimator, KLCoef: s.KLCoef, EntropyCoef: s.EntropyCoef,
		LogProbs: c.lps, Entropy: c.ent,
	}
	if r.Rule == "" {
		r.Rule = SelfPPO
	}
	widen := func(xs []float32) []float64 {
		out := make([]float64, len(xs))
		for i, x := range xs {
			out[i] = float64(x)
		}
		return out
	}
	for _, sm := range c.samples {
		r.Old = append(r.Old, widen(sm.OldLogProbs))
		r.Ref = append(r.Ref, widen(sm.RefLogProbs))
		r.Adv = append(r.Adv, sm.Advantage)
		r.Masked = append(r.Masked, sm.Masked)
	}
	return r
}

// closeTo is a relative comparison with an absolute floor for values near 0.
func closeTo(got, want, rel, floor float64) bool {
	return math.Abs(got-want) <= rel*math.Max(math.Abs(got), math.Abs(want))+floor
}

// The self-sample loss of MiniBatchLoss64 (value and gradient, float64 both
// sides) against testdata/loss_oracle.py, an autograd implementation of
// verl's and TRL's losses; BatchAdvantages with advantage_std batch against
// TRL's scale_rewards="batch"; OverlongReward against verl's DAPO reward
// manager. CISPO's gradient is that of the surrogate −sg(c)·A·lp, which a
// finite difference of Total (whose CISPO value is −c·A) does not give: this
// is its check. One Python process runs every case.
func TestLossAgainstTorch(t *testing.T) {
	rng := rand.New(rand.NewPCG(32, 1))
	cases := oracleLossCases(rng)
	var req struct {
		Losses          []oracleLoss       `json:"losses"`
		BatchAdvantages []oracleAdvantages `json:"batch_advantages"`
		Overlong        []oracleOverlong   `json:"overlong"`
	}
	for _, c := range cases {
		req.Losses = append(req.Losses, c.request())
	}

	// Batch std: one agent, 5 prompts of 4 responses: binary rewards, a
	// uniform group, rewards in [−1, 2].
	advSettings := MustPreset("grpo")
	advSettings.AdvantageStd = BatchStd
	advRewards := [][][]float64{
		{{1, 0, 0, 1}, {0, 0, 0, 1}, {1, 1, 1, 1}, {0, 1, 1, 1}, {0, 0, 0, 0}},
		{{0.5, -1, 2, 0.25}, {1.5, 1.5, 1.5, 1.5}, {-0.75, 0, 0.1, 1.9}},
	}
	for _, rs := range advRewards {
		req.BatchAdvantages = append(req.BatchAdvantages, oracleAdvantages{rs, advSettings.AdvantageEpsilon})
	}

	// The overlong reward over every length up to the limit.
	type overlongSetting struct {
		max, buffer int
		penalty     float64
	}
	overlongSettings := []overlongSetting{{16, 4, 1}, {20, 20, 0.5}, {7, 1, 2}, {4096, 1024, 1}}
	for _, o := range overlongSettings {
		for n := 0; n <= o.max; n += 1 + o.max/64 {
			req.Overlong = append(req.Overlong, oracleOverlong{n, o.max, o.buffer, o.penalty})
		}
	}

	var res struct {
		Losses          []oracleLossResult `json:"losses"`
		BatchAdvantages []struct {
			Adv [][]float64 `json:"adv"`
		} `json:"batch_advantages"`
		Overlong []float64 `json:"overlong"`
	}
	pyenv.Run(t, "testdata/loss_oracle.py", req, &res)
	if len(res.Losses) != len(cases) || len(res.BatchAdvantages) != len(advRewards) || len(res.Overlong) != len(req.Overlong) {
		t.Fatalf("the oracle answered %d, %d and %d cases for %d, %d and %d", len(res.Losses), len(res.BatchAdvantages),
			len(res.Overlong), len(cases), len(advRewards), len(req.Overlong))
	}

	const rel = 1e-9
	masked := 0
	clipped, units := map[string]int{}, map[string]int{}
	for i, c := range cases {
		want := res.Losses[i]
		grad := make([][]float64, len(c.lps))
		scale := 0.0
		for b := range grad {
			grad[b] = make([]float64, len(c.lps[b]))
			for tk := range grad[b] {
				grad[b][tk] = math.NaN() // every element must be overwritten
			}
			for _, g := range want.Grad[b] {
				scale = math.Max(scale, math.Abs(g))
			}
		}
		l, err := c.s.MiniBatchLoss64(0, c.samples, c.lps, grad)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !closeTo(l.Policy, want.Policy, rel, 1e-15) || !closeTo(l.KL, want.KL, rel, 1e-15) || !closeTo(l.Total, want.Total, rel, 1e-15) {
			t.Errorf("%s: policy %.15g KL %.15g total %.15g, torch %.15g %.15g %.15g", c.name, l.Policy, l.KL, l.Total, want.Policy, want.KL, want.Total)
		}
		for b := range grad {
			if c.samples[b].Masked {
				masked++
			}
			for tk := range grad[b] {
				if !closeTo(grad[b][tk], want.Grad[b][tk], rel, 1e-13*scale) {
					t.Errorf("%s: dLoss/dlp[%d][%d] = %.15g, torch %.15g", c.name, b, tk, grad[b][tk], want.Grad[b][tk])
				}
				// EntropyWeights are float32: one rounding.
				e := 0.0
				if l.EntropyWeights != nil {
					e = float64(l.EntropyWeights[b][tk])
				}
				if !closeTo(e, want.EntropyGrad[b][tk], 1e-7, 0) {
					t.Errorf("%s: entropy weight [%d][%d] = %.9g, torch dLoss/dH %.9g", c.name, b, tk, e, want.EntropyGrad[b][tk])
				}
			}
		}
		clipped[c.shape] += l.Stats.SelfClipped
		units[c.shape] += l.Stats.SelfClipUnits
	}
	// The draw must reach both sides of each clip range and the masks, or the
	// check proves little.
	for shape, n := range units {
		if f := float64(clipped[shape]) / float64(n); f < 0.1 || f > 0.9 {
			t.Errorf("%s: %d of %d units clipped", shape, clipped[shape], n)
		}
	}
	if masked < len(cases)/2 {
		t.Errorf("only %d masked samples in %d cases", masked, len(cases))
	}

	for i, rs := range advRewards {
		groups := make([][]Response, len(rs))
		for p, g := range rs {
			for _, r := range g {
				groups[p] = append(groups[p], Response{Source: 0, Reward: r})
			}
		}
		got, err := advSettings.BatchAdvantages(0, groups, nil)
		if err != nil {
			t.Fatal(err)
		}
		for p := range got {
			for k := range got[p] {
				if want := res.BatchAdvantages[i].Adv[p][k]; !closeTo(got[p][k], want, 1e-12, 1e-15) {
					t.Errorf("batch std case %d: A[%d][%d] = %.15g, TRL's %.15g", i, p, k, got[p][k], want)
				}
			}
		}
	}

	for i, o := range req.Overlong {
		s := MustPreset("dapo")
		s.OverlongBuffer, s.OverlongPenalty = o.Buffer, o.Penalty
		got, err := s.OverlongReward(o.Length, o.MaxLen)
		if err != nil {
			t.Fatal(err)
		}
		if !closeTo(got, res.Overlong[i], 1e-15, 0) {
			t.Errorf("overlong reward of %d tokens (max %d, buffer %d, penalty %v) = %v, verl's %v", o.Length, o.MaxLen, o.Buffer, o.Penalty, got, res.Overlong[i])
		}
	}
}
