package train

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/metrics"
	"github.com/hacrl/hacrl/rollout"
)

// optionsRun trains tinyConfig's three agents for one step with method m
// (the inside of a YAML flow mapping: "grpo, kl_coef: 0") and logged
// rollouts (variantRun), and returns the first mini-batch's gradient weights
// per agent, the step's rollout log and the metrics.
func optionsRun(t *testing.T, m string) (map[string][][]float32, []rollout.Record, []metrics.Record) {
	t.Helper()
	seen, recs, ms := variantRun(t, m)
	grads := map[string][][]float32{}
	for _, b := range seen {
		if b.m == 0 {
			grads[b.agent] = b.grad
		}
	}
	return grads, recs, ms
}

// The loss options reach the update: in the first mini-batch of a step the
// policy is the sampling policy (every ratio exactly 1), so each token's
// gradient weight is −A times the aggregation's scale, which this test
// recomputes from the rollout log's advantages and the agents'
// max_new_tokens (24, 24 and 16) — checking that the options are wired, per
// learner, not the formulas (package hacpo's tests do that).
func TestLossOptionsReachTheUpdate(t *testing.T) {
	maxNew := map[string]int{"gpt-char": 24, "llama-char": 24, "llama-bpe": 16}
	cases := []struct {
		method string
		// scale of a token of row b given the rows' lengths and the agent.
		scale func(lens []int, masked []bool, b int, agent string) float64
		mask  bool
	}{
		{"dr_grpo", func(lens []int, masked []bool, b int, agent string) float64 {
			return 1 / float64(len(lens)*maxNew[agent])
		}, false},
		{"cispo", func(lens []int, masked []bool, b int, agent string) float64 {
			n := 0
			for _, l := range lens {
				n += l
			}
			return 1 / float64(n)
		}, false},
		{"grpo, mask_truncated: true, kl_coef: 0", func(lens []int, masked []bool, b int, agent string) float64 {
			kept := 0
			for _, m := range masked {
				if !m {
					kept++
				}
			}
			return 1 / float64(lens[b]) / float64(kept)
		}, true},
	}
	for _, c := range cases {
		t.Run(c.method, func(t *testing.T) {
			grads, recs, ms := optionsRun(t, c.method)
			if len(grads) != 3 {
				t.Fatalf("first mini-batches of %d agents, want 3", len(grads))
			}
			masked := 0
			for agent, rows := range grads {
				var adv []float64
				var trunc []bool
				for _, r := range recs {
					if r.Agent == agent {
						adv = append(adv, r.Learners[0].Advantage)
						trunc = append(trunc, r.Truncated)
					}
				}
				if len(adv) != len(rows) {
					t.Fatalf("%s: %d logged responses, %d gradient rows", agent, len(adv), len(rows))
				}
				nonzero := false
				for _, a := range adv {
					nonzero = nonzero || a != 0
				}
				if !nonzero {
					t.Fatalf("%s: every advantage is 0: the case checks nothing", agent)
				}
				lens := make([]int, len(rows))
				for b := range rows {
					lens[b] = len(rows[b])
				}
				for b, row := range rows {
					want := float32(-adv[b] * c.scale(lens, trunc, b, agent))
					if c.mask && trunc[b] {
						want = 0
						masked++
					}
					for tk, g := range row {
						if g != want && !(c.mask && !trunc[b] && math.Abs(float64(g-want)) <= 1e-7*math.Abs(float64(want))) {
							t.Fatalf("%s row %d token %d: weight %v, want %v (advantage %v)", agent, b, tk, g, want, adv[b])
						}
					}
				}
			}
			if c.mask {
				if masked == 0 {
					t.Fatal("no truncated response to mask: the case checks nothing")
				}
				for _, r := range ms {
					if r.Agent != "" && r.Values["masked_frac"] != r.Values["length/truncated_frac"] {
						t.Errorf("%s: masked_frac %v, truncated_frac %v", r.Agent, r.Values["masked_frac"], r.Values["length/truncated_frac"])
					}
				}
			}
		})
	}
}

// kl_in_reward moves the KL into the rewards: the loss has none, the
// advantages are those of the penalised rewards, and a method that shares
// rollouts refuses it, naming the key.
func TestKLInReward(t *testing.T) {
	_, recs, ms := optionsRun(t, "grpo, kl_coef: 0.05, kl_in_reward: true, kl_estimator: k1")
	for _, r := range ms {
		if r.Agent == "" {
			continue
		}
		if _, ok := r.Values["kl/reward_penalty"]; !ok || r.Values["loss/kl"] != 0 {
			t.Errorf("%s: kl/reward_penalty %v, loss/kl %v", r.Agent, r.Values["kl/reward_penalty"], r.Values["loss/kl"])
		}
	}
	// Each group's advantages sum to 0 (mean baseline) but are not those of
	// the task rewards alone: the penalty differs per response.
	differs := false
	for i := 0; i+1 < len(recs); i += 2 {
		a, b := recs[i], recs[i+1]
		if a.Agent != b.Agent || a.Prompt != b.Prompt {
			t.Fatalf("records %d, %d are not one group", i, i+1)
		}
		if s := a.Learners[0].Advantage + b.Learners[0].Advantage; math.Abs(s) > 1e-9 {
			t.Errorf("group advantages sum to %v", s)
		}
		if a.Reward == b.Reward && a.Learners[0].Advantage != 0 {
			differs = true
		}
	}
	if !differs {
		t.Log("no group with equal task rewards and a non-zero advantage (the penalty separated none)")
	}

	dir := t.TempDir()
	cfg := tinyConfig(t, dir, "hacpo", 1)
	yes, coef := true, 0.05
	cfg.Method.KLInReward, cfg.Method.KLCoef = &yes, &coef
	if _, err := New(context.Background(), cfg, Options{}); err == nil || !strings.Contains(err.Error(), "kl_in_reward") || !strings.Contains(err.Error(), "method") {
		t.Errorf("hacpo with kl_in_reward: %v", err)
	}
}

// reward.range and reward.success_above reach the method's settings: the
// baseline's anchor and guard, and the capability's success threshold.
func TestRewardRangeSettings(t *testing.T) {
	cfg := tinyConfig(t, t.TempDir(), "hacpo", 1)
	s, err := methodSettings(cfg)
	if err != nil || s.RewardMin != 0 || s.RewardMax != 1 || s.Capability.Success != 0 || s.Capability.RewardMin != 0 {
		t.Fatalf("default range: %+v %v", s, err)
	}
	above := 0.25
	cfg.Reward = &config.Reward{Command: []string{"x"}, Range: []float64{-1, 2}, SuccessAbove: &above}
	s, err = methodSettings(cfg)
	if err != nil || s.RewardMin != -1 || s.RewardMax != 2 || s.Capability.Success != 0.25 || s.Capability.RewardMin != -1 {
		t.Fatalf("range [-1, 2], success above 0.25: %+v %v", s, err)
	}
	cfg.Reward.SuccessAbove = nil
	if s, _ = methodSettings(cfg); s.Capability.Success != -1 {
		t.Errorf("success_above defaults to the range's min, got %v", s.Capability.Success)
	}
}

// The entropy bonus reaches the update: with token-mean aggregation and the
// whole step in one mini-batch (tinyConfig: 8 responses, mini_batch 8) the
// bonus is −entropy_coef × the mean token entropy of the agent's responses,
// which the metric entropy measured on the same weights before the update.
func TestEntropyBonus(t *testing.T) {
	_, _, ms := optionsRun(t, "grpo, loss_agg: token-mean, entropy_coef: 0.1")
	seen := 0
	for _, r := range ms {
		if r.Agent == "" {
			continue
		}
		b, ok := r.Values["loss/entropy_bonus"]
		want := -0.1 * r.Values["entropy"]
		if !ok || want == 0 || math.Abs(b-want) > 1e-5*math.Abs(want) {
			t.Errorf("%s: loss/entropy_bonus %v, want −0.1 × entropy = %v", r.Agent, b, want)
		}
		seen++
	}
	if seen != 3 {
		t.Errorf("%d agents' records, want 3", seen)
	}
}

// The rollout correction reaches the update: with gpt-char sampling from
// bfloat16 weights, every learner (all three see gpt-char's responses under
// HACPO) weighs them, the weights are not all 1, the other agents' are not
// weighted, and the update differs from the run without correction.
func TestRolloutCorrection(t *testing.T) {
	run := func(is string) []metrics.Record {
		dir := t.TempDir()
		cfg := tinyConfig(t, dir, "hacpo, rollout_is: "+is, 1)
		cfg.Eval.Every, cfg.Eval.Sets = 0, nil
		cfg.Reward = &config.Reward{Command: []string{pythonPath(t), "testdata/logreward.py", filepath.Join(dir, "reward.log")},
			Timeout: config.DefaultRewardTimeout, StartTimeout: config.DefaultRewardStartTimeout}
		cfg.Agents[0].SampleDType = "bfloat16"
		r, err := New(context.Background(), cfg, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if want := "rollout correction: " + is + " weights min(π_old/π_sampler, 2), for gpt-char"; is != "off" && !strings.Contains(r.Plan(), want) {
			t.Errorf("plan lacks %q:\n%s", want, r.Plan())
		}
		if _, err := r.Train(context.Background()); err != nil {
			t.Fatal(err)
		}
		ms, err := metrics.ReadFile(filepath.Join(cfg.Out, "metrics.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		return ms
	}
	off := map[string]map[string]float64{}
	for _, r := range run("off") {
		if r.Agent != "" {
			off[r.Agent] = r.Values
			if _, ok := r.Values["rollout_is/weight_mean"]; ok {
				t.Errorf("%s: rollout_is metrics without the correction", r.Agent)
			}
		}
	}
	for _, is := range []string{"sequence", "geometric"} {
		for _, r := range run(is) {
			if r.Agent == "" {
				continue
			}
			w, ok := r.Values["rollout_is/weight_mean"]
			if !ok || !(w > 0) || w == 1 || !(w <= 2) {
				t.Errorf("%s %s: rollout_is/weight_mean %v", is, r.Agent, w)
			}
			if f := r.Values["rollout_is/capped_frac"]; !(f >= 0 && f <= 1) {
				t.Errorf("%s %s: rollout_is/capped_frac %v", is, r.Agent, f)
			}
			if r.Values["loss/policy"] == off[r.Agent]["loss/policy"] {
				t.Errorf("%s %s: loss/policy %v as without the correction", is, r.Agent, r.Values["loss/policy"])
			}
		}
	}
}
