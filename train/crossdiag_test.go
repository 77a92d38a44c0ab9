package train

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/hacpo"
	"github.com/hacrl/hacrl/metrics"
	"github.com/hacrl/hacrl/rollout"
)

// batchSeen is one mini-batch as the loss saw it.
type batchSeen struct {
	agent   string
	m       int
	samples []hacpo.Sample
	loss    hacpo.Loss
	grad    [][]float32
}

// variantRun trains tinyConfig's three agents for one step with method m
// (a YAML flow mapping's inside), rewards that vary within groups and the
// rollout log, and returns every mini-batch the loss saw, the log and the
// metrics.
func variantRun(t *testing.T, m string) ([]batchSeen, []rollout.Record, []metrics.Record) {
	t.Helper()
	dir := t.TempDir()
	cfg := tinyConfig(t, dir, m, 1)
	cfg.Reward = &config.Reward{Command: []string{pythonPath(t), "testdata/logreward.py", filepath.Join(dir, "reward.log")},
		Timeout: config.DefaultRewardTimeout, StartTimeout: config.DefaultRewardStartTimeout}
	cfg.Eval.Every, cfg.Eval.Sets = 0, nil
	cfg.Rollouts.Every = 1
	run, err := New(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var seen []batchSeen
	run.lossHook = func(step int, agent string, m int, samples []hacpo.Sample, loss hacpo.Loss, grad [][]float32) {
		g := make([][]float32, len(grad))
		for b := range grad {
			g[b] = slices.Clone(grad[b])
		}
		seen = append(seen, batchSeen{agent, m, slices.Clone(samples), loss, g})
	}
	if _, err := run.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := rollout.ReadLog(rollout.LogPath(cfg.Out, 1))
	if err != nil {
		t.Fatal(err)
	}
	ms, err := metrics.ReadFile(filepath.Join(cfg.Out, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return seen, recs, ms
}

// stepValues returns agent's step-1 training record.
func stepValues(t *testing.T, ms []metrics.Record, agent string) map[string]float64 {
	t.Helper()
	for _, r := range ms {
		if r.Agent == agent && r.Step == 1 {
			if _, ok := r.Values["loss/policy"]; ok {
				return r.Values
			}
		}
	}
	t.Fatalf("no step-1 record of %s", agent)
	return nil
}

// The cross diagnostics against the rollout log, which records every use of
// a response independently of them: per learner and source, the share of
// negative advantages, and the ratio percentiles as order statistics of
// the logged ratios; per-token ratios only between agents that share a
// tokenizer (gpt-char and llama-char), none from the BPE agent.
func TestCrossDiagnosticsAgainstTheRolloutLog(t *testing.T) {
	_, recs, ms := variantRun(t, "hacpo")
	type key struct{ learner, source string }
	ratios := map[key][]float64{}
	neg := map[key]int{}
	for _, r := range recs {
		for _, u := range r.Learners {
			if u.Self || u.Skipped {
				continue
			}
			k := key{u.Learner, r.Agent}
			ratios[k] = append(ratios[k], u.Ratio)
			if u.Advantage < 0 {
				neg[k]++
			}
		}
	}
	if len(ratios) != 6 {
		t.Fatalf("%d learner-source pairs in the log, want 6", len(ratios))
	}
	anyNeg := false
	for k, rs := range ratios {
		v := stepValues(t, ms, k.learner)
		sfx := "/" + k.source
		if got, want := v["cross/neg_frac"+sfx], float64(neg[k])/float64(len(rs)); got != want {
			t.Errorf("%s ← %s: neg_frac %v, the log says %v", k.learner, k.source, got, want)
		}
		anyNeg = anyNeg || neg[k] > 0
		slices.Sort(rs)
		n := len(rs)
		med := rs[n/2]
		if n%2 == 0 {
			med = (rs[n/2-1] + rs[n/2]) / 2
		}
		if got := v["cross/ratio_p50"+sfx]; math.Abs(got-med) > 1e-12*med {
			t.Errorf("%s ← %s: ratio_p50 %v, median of the logged ratios %v", k.learner, k.source, got, med)
		}
		for _, q := range []struct {
			name string
			p    float64
		}{{"p01", 0.01}, {"p10", 0.1}, {"p90", 0.9}, {"p99", 0.99}} {
			// A p-quantile x has at most p·(n−1) ratios below it and at
			// most (1−p)·(n−1) above it.
			x := v["cross/ratio_"+q.name+sfx]
			below, above := 0, 0
			for _, r := range rs {
				if r < x {
					below++
				}
				if r > x {
					above++
				}
			}
			if float64(below) > q.p*float64(n-1)+1 || float64(above) > (1-q.p)*float64(n-1)+1 || x < rs[0] || x > rs[n-1] {
				t.Errorf("%s ← %s: ratio_%s %v has %d of %d ratios below and %d above", k.learner, k.source, q.name, x, below, n, above)
			}
		}
		g := v["cross/neg_grad_frac"+sfx]
		if !(g >= 0 && g <= 1) {
			t.Errorf("%s ← %s: neg_grad_frac %v", k.learner, k.source, g)
		}
		shared := (k.learner == "gpt-char" || k.learner == "llama-char") && (k.source == "gpt-char" || k.source == "llama-char")
		_, tok := v["cross/token_ratio_p50"+sfx]
		if a := v["cross/aligned_frac"+sfx]; shared != (a > 0) || shared != tok {
			t.Errorf("%s ← %s: aligned_frac %v, token ratios %v; want them exactly where the tokenizer is shared", k.learner, k.source, a, tok)
		}
	}
	if !anyNeg {
		t.Fatal("no negative cross advantage: the check of neg_frac is empty")
	}
}

// cross_advantage: capable reaches the loss, set as a key or by the
// hacpo-capable preset: a negative cross sample from a source less capable
// than the learner (ω < 1) has no term and no gradient, one from a source at
// least as capable keeps its term; its share of the gradient,
// cross/neg_grad_frac, is 0 exactly for the sources less capable.
func TestCapableCrossAdvantageReachesTheLoss(t *testing.T) {
	for _, method := range []string{"hacpo, cross_advantage: capable", "hacpo-capable"} {
		t.Run(method, func(t *testing.T) { checkCapable(t, method) })
	}
}

func checkCapable(t *testing.T, method string) {
	seen, _, ms := variantRun(t, method)
	dropped, kept := 0, 0
	for _, b := range seen {
		for n, sm := range b.samples {
			if sm.Self || sm.Advantage >= 0 {
				continue
			}
			zero := b.loss.Seqs[n].Policy == 0 && !slices.ContainsFunc(b.grad[n], func(g float32) bool { return g != 0 })
			switch {
			case sm.Omega < 1 && !zero:
				t.Errorf("%s m=%d sample %d: ω %v < 1, A %v: term %v, want none", b.agent, b.m, n, sm.Omega, sm.Advantage, b.loss.Seqs[n].Policy)
			case sm.Omega < 1:
				dropped++
			case b.loss.Seqs[n].Clip == hacpo.Inside && zero:
				t.Errorf("%s m=%d sample %d: ω %v ≥ 1, A %v inside the clip: no term", b.agent, b.m, n, sm.Omega, sm.Advantage)
			case b.loss.Seqs[n].Clip == hacpo.Inside:
				kept++
			}
		}
	}
	if dropped == 0 || kept == 0 {
		t.Fatalf("%d negative cross samples dropped, %d kept: the case checks too little", dropped, kept)
	}
	for _, b := range seen {
		v := stepValues(t, ms, b.agent)
		for _, sm := range b.samples {
			if !sm.Self && sm.Omega < 1 {
				src := []string{"gpt-char", "llama-char", "llama-bpe"}[sm.Source]
				if g := v["cross/neg_grad_frac/"+src]; g != 0 {
					t.Errorf("%s ← %s (ω %v): neg_grad_frac %v, want 0", b.agent, src, sm.Omega, g)
				}
			}
		}
	}
}

// The learner's start-of-step log-probs reach the cross samples: under the
// original semantics cross samples are in the first update too, before
// any change of the policy, where the start ratio exp(start − source's mean)
// must be the ratio the loss computes; the adaptive anchor of each source is
// min(1, the median start ratio of its samples in the step).
func TestLearnerStartReachesTheCrossSamples(t *testing.T) {
	for _, method := range []string{"hacpo, semantics: original, cross_bounds: decoupled", "hacpo, semantics: original, cross_bounds: adaptive"} {
		t.Run(method, func(t *testing.T) {
			seen, _, ms := variantRun(t, method)
			first := 0
			start := map[string]map[int][]float64{} // learner → source → start ratios
			for _, b := range seen {
				for n, sm := range b.samples {
					if sm.Self {
						continue
					}
					s0 := math.Exp(sm.LearnerStartMeanLogProb - sm.OldMeanLogProb)
					if start[b.agent] == nil {
						start[b.agent] = map[int][]float64{}
					}
					start[b.agent][sm.Source] = append(start[b.agent][sm.Source], s0)
					if b.m == 0 {
						first++
						if r := b.loss.Seqs[n].Ratio; math.Abs(r-s0) > 1e-5*r {
							t.Errorf("%s m=0 sample %d: start ratio %v, the loss's %v", b.agent, n, s0, r)
						}
					}
				}
			}
			if first == 0 {
				t.Fatal("no cross sample in a first update")
			}
			if !strings.Contains(method, "adaptive") {
				return
			}
			names := []string{"gpt-char", "llama-char", "llama-bpe"}
			for learner, bySrc := range start {
				v := stepValues(t, ms, learner)
				for src, rs := range bySrc {
					want, err := hacpo.CrossAnchor(rs)
					if err != nil {
						t.Fatal(err)
					}
					if got := v["cross/anchor/"+names[src]]; math.Abs(got-want) > 1e-12 {
						t.Errorf("%s ← %s: anchor %v, want %v", learner, names[src], got, want)
					}
					for _, b := range seen {
						for _, sm := range b.samples {
							if b.agent == learner && !sm.Self && sm.Source == src && sm.CrossAnchor != want {
								t.Fatalf("%s ← %s: a sample's anchor %v, want %v", learner, names[src], sm.CrossAnchor, want)
							}
						}
					}
				}
			}
		})
	}
}

// Token ratios are compared only between agents that load the same
// tokenizer: equal ids from two tokenizers (which short responses can have)
// are not the same tokens.
func TestCrossDiagnosticsNeedTheSameTokenizer(t *testing.T) {
	cfg := tinyConfig(t, t.TempDir(), "hacpo", 1)
	sums := tokenizerSums(cfg)
	if sums[0] == "" || sums[0] != sums[1] || sums[2] == sums[0] {
		t.Fatalf("tokenizer sums %q: want gpt-char's and llama-char's equal, llama-bpe's another", sums)
	}
	ro := &rollout.Rollout{Source: 2, Text: "7", Tokens: []int{5, 9}, Stopped: true, OldLogProbs: []float32{-1, -0.5}}
	item := &rollout.Item{Rollout: ro, Response: []int{5, 9}}
	decode := func([]int) string { return "7" }
	for _, c := range []struct {
		learner, source int
		aligned         bool
	}{{0, 2, false}, {2, 0, false}, {1, 0, true}} {
		ro.Source = c.source
		d := newCrossDiag(cfg.AgentNames(), c.learner, sums)
		sm := []hacpo.Sample{{Source: c.source, Advantage: -1}}
		d.add([]*rollout.Item{item}, sm, []hacpo.SeqLoss{{Ratio: 0.5}}, [][]float32{{0.1, -0.1}}, [][]float32{{-1, -1}}, decode)
		v := map[string]float64{}
		d.metrics(v)
		src := cfg.AgentNames()[c.source]
		if got := v["cross/aligned_frac/"+src] == 1; got != c.aligned {
			t.Errorf("learner %d, source %d: aligned_frac %v, want aligned %v", c.learner, c.source, v["cross/aligned_frac/"+src], c.aligned)
		}
		if _, ok := v["cross/token_ratio_p50/"+src]; ok != c.aligned {
			t.Errorf("learner %d, source %d: token ratios %v, want them %v", c.learner, c.source, ok, c.aligned)
		}
		// Token ratios exp(−1 − (−1)) = 1 and exp(−1 − (−0.5)): their median is the mean of the two.
		if c.aligned && math.Abs(v["cross/token_ratio_p50/"+src]-(1+math.Exp(-0.5))/2) > 1e-12 || v["cross/neg_frac/"+src] != 1 || v["cross/neg_grad_frac/"+src] != 1 {
			t.Errorf("learner %d, source %d: %v", c.learner, c.source, v)
		}
	}
}
