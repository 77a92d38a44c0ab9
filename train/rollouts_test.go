package train

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/hacpo"
	"github.com/hacrl/hacrl/metrics"
	"github.com/hacrl/hacrl/rollout"
)

// stepMetrics returns each step's per-agent training metrics (eval records left out).
func stepMetrics(t *testing.T, out string) map[int]map[string]map[string]float64 {
	t.Helper()
	recs, err := metrics.ReadFile(filepath.Join(out, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	m := map[int]map[string]map[string]float64{}
	for _, r := range recs {
		if _, ok := r.Values["reward/mean"]; !ok || r.Agent == "" {
			continue
		}
		if m[r.Step] == nil {
			m[r.Step] = map[string]map[string]float64{}
		}
		m[r.Step][r.Agent] = r.Values
	}
	return m
}

// checkLog asserts that a step's rollout log holds every agent's B·G responses
// in order and adds up to the step's metrics: rewards, lengths, truncation,
// ω, re-tokenization changes, and each learner's ratios and clip fractions.
func checkLog(t *testing.T, step int, recs []rollout.Record, agents []string, vals map[string]map[string]float64, B, G int, algo hacpo.Settings) {
	t.Helper()
	shared, tokenLevel := algo.SharesRollouts, algo.RatioLevel == hacpo.TokenLevel
	// wantClip is where the ratio lies against the clip range in effect.
	wantClip := func(u rollout.LearnerUse) string {
		lo, hi := 1-algo.SelfClipLow, 1+algo.SelfClipHigh
		switch {
		case u.Self && tokenLevel:
			return rollout.ClipInside
		case !u.Self && algo.CrossRule == hacpo.CrossHACPO && !algo.CrossClip:
			return rollout.ClipInside
		case !u.Self && algo.CrossRule == hacpo.CrossHACPO:
			lo, hi = algo.CrossLower(u.Update), 1
		}
		switch {
		case u.Ratio < lo:
			return rollout.ClipBelow
		case u.Ratio > hi:
			return rollout.ClipAbove
		}
		return rollout.ClipInside
	}
	if len(recs) != len(agents)*B*G {
		t.Fatalf("step %d: %d records, want %d agents × %d prompts × %d responses", step, len(recs), len(agents), B, G)
	}
	type agg struct {
		n, tokens, truncated int
		reward               float64
	}
	type learnerAgg struct {
		self, selfClipped, cross, below, above int
		selfTokens, clippedTokens              int
		selfRatio, crossRatio                  float64
		updates                                map[int]bool
		changed, total                         map[string]int
	}
	src := map[string]*agg{}
	lrn := map[string]*learnerAgg{}
	for _, a := range agents {
		src[a] = &agg{}
		lrn[a] = &learnerAgg{updates: map[int]bool{}, changed: map[string]int{}, total: map[string]int{}}
	}
	for n, r := range recs {
		// Order: by prompt, then agent in config order, then sample.
		wantPrompt, wantAgent, wantSample := n/(len(agents)*G), agents[n/G%len(agents)], n%G
		if r.Step != step || r.Prompt != wantPrompt || r.Agent != wantAgent || r.Sample != wantSample {
			t.Fatalf("step %d record %d: step %d prompt %d agent %s sample %d, want %d %d %s %d", step, n, r.Step, r.Prompt, r.Agent, r.Sample, step, wantPrompt, wantAgent, wantSample)
		}
		if r.ProblemID == "" || r.Question == "" || r.Answer == "" || !strings.Contains(r.PromptText, r.Question) {
			t.Errorf("step %d record %d: problem %q question %q answer %q prompt text %q", step, n, r.ProblemID, r.Question, r.Answer, r.PromptText)
		}
		if strings.Contains(r.PromptText, "<|im_start|>") != (r.Agent == "llama-bpe") {
			t.Errorf("step %d record %d: %s's prompt text %q (only llama-bpe has a chat template)", step, n, r.Agent, r.PromptText)
		}
		s := src[r.Agent]
		s.n++
		s.reward += r.Reward
		s.tokens += r.Tokens
		if r.Truncated {
			s.truncated++
		}
		var wantLearners []string
		for _, a := range agents {
			if shared || a == r.Agent {
				wantLearners = append(wantLearners, a)
			}
		}
		var got []string
		for _, u := range r.Learners {
			got = append(got, u.Learner)
			l := lrn[u.Learner]
			if u.Self != (u.Learner == r.Agent) {
				t.Errorf("step %d record %d: learner %s self = %v for a response of %s", step, n, u.Learner, u.Self, r.Agent)
			}
			if math.IsNaN(u.Advantage) || math.IsInf(u.Advantage, 0) || u.Ratio <= 0 || u.Kept != (u.Clip == rollout.ClipInside) || u.Clip != wantClip(u) {
				t.Errorf("step %d record %d learner %s: %+v; want clip %s", step, n, u.Learner, u, wantClip(u))
			}
			if !u.Self {
				if w := vals[u.Learner]["omega/"+r.Agent]; u.Omega != w {
					t.Errorf("step %d record %d learner %s: ω %v, metrics say %v", step, n, u.Learner, u.Omega, w)
				}
				l.total[r.Agent]++
				if u.RetokenizeChanged {
					l.changed[r.Agent]++
				}
			}
			if u.Skipped {
				continue
			}
			l.updates[u.Update] = true
			if u.Self {
				l.self++
				l.selfRatio += u.Ratio
				l.selfTokens += r.Tokens
				l.clippedTokens += u.ClippedTokens
				if !u.Kept {
					l.selfClipped++
				}
				continue
			}
			l.cross++
			l.crossRatio += u.Ratio
			switch u.Clip {
			case rollout.ClipBelow:
				l.below++
			case rollout.ClipAbove:
				l.above++
			}
		}
		if !slices.Equal(got, wantLearners) {
			t.Errorf("step %d record %d: learners %v, want %v", step, n, got, wantLearners)
		}
	}
	frac := func(a, b int) float64 {
		if b == 0 {
			return 0
		}
		return float64(a) / float64(b)
	}
	for _, a := range agents {
		s, v := src[a], vals[a]
		if s.n != B*G {
			t.Errorf("step %d: %d responses of %s, want %d", step, s.n, a, B*G)
		}
		// Same values summed in the same order as the metrics: exact.
		exact := map[string]float64{"reward/mean": s.reward / float64(s.n), "length/mean": float64(s.tokens) / float64(s.n), "length/truncated_frac": frac(s.truncated, s.n)}
		l := lrn[a]
		exact["clip/self_frac"] = frac(l.selfClipped, l.self)
		if tokenLevel { // GRPO: the fraction of self tokens outside the clip range
			exact["clip/self_frac"] = frac(l.clippedTokens, l.selfTokens)
		}
		exact["updates"] = float64(len(l.updates))
		if shared {
			exact["clip/cross_lower_frac"] = frac(l.below, l.cross)
			exact["clip/cross_upper_frac"] = frac(l.above, l.cross)
			for _, o := range agents {
				if o != a {
					exact["retokenize/changed_frac/"+o] = frac(l.changed[o], l.total[o])
				}
			}
		}
		for k, want := range exact {
			if got := v[k]; got != want {
				t.Errorf("step %d %s: the log gives %s = %v, metrics.jsonl %v", step, a, k, want, got)
			}
		}
		// Ratio means are summed per mini-batch in the metrics: equal to rounding.
		if got, want := v["ratio/self_mean"], l.selfRatio/float64(l.self); math.Abs(got-want) > 1e-12 {
			t.Errorf("step %d %s: ratio/self_mean %v, the log gives %v", step, a, got, want)
		}
		if shared {
			if got, want := v["ratio/cross_mean"], l.crossRatio/float64(l.cross); math.Abs(got-want) > 1e-12 {
				t.Errorf("step %d %s: ratio/cross_mean %v, the log gives %v", step, a, got, want)
			}
		}
		t.Logf("step %d %s: reward %.3f, self %d (clipped %d), cross %d (below %d, above %d), changed %v of %v", step, a,
			exact["reward/mean"], l.self, l.selfClipped, l.cross, l.below, l.above, l.changed, l.total)
	}
}

// readLogs reads every rollout log of a run directory, by step.
func readLogs(t *testing.T, out string) map[int][]rollout.Record {
	t.Helper()
	steps, err := rollout.LogSteps(out)
	if err != nil {
		t.Fatal(err)
	}
	logs := map[int][]rollout.Record{}
	for _, s := range steps {
		if logs[s], err = rollout.ReadLog(rollout.LogPath(out, s)); err != nil {
			t.Fatal(err)
		}
	}
	return logs
}

// logText is a log file's JSONL text.
func logText(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	text, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(text)
}

// exampleConfig is a short HACPO run of the three example agents (warm-started
// on arith, so they earn rewards), logging every step's rollouts. The early
// agent's short response limit truncates some of its responses.
func exampleConfig(t *testing.T, out string) *config.Config {
	t.Helper()
	src := fmt.Sprintf(`
seed: 3
out: %s
steps: 3
method: {name: hacpo}
task: {name: arith, digits: 2, operators: "+-"}
batch: {prompts_per_step: 4, responses_per_prompt: 2, mini_batch: 8}
backend: go:ops_sequential
rollouts: {every: 1}
agents:
  - {name: gpt-char, checkpoint: ../examples/agents/gpt-char, optimizer: {lr: 0.0001}, sampling: {max_new_tokens: 40}}
  - {name: gpt-char-early, checkpoint: ../examples/agents/gpt-char-early, optimizer: {lr: 0.0001}, sampling: {max_new_tokens: 12}}
  - {name: llama-bpe, checkpoint: ../examples/agents/llama-bpe, template: {kind: chat}, optimizer: {lr: 0.0001}, sampling: {max_new_tokens: 32}}
checkpoint: {every: 1, keep: 2}
`, out)
	cfg, err := config.Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestRolloutLogs: a real three-agent HACPO run logs every step's rollouts,
// and the logs add up to its metrics; a second run with the same seed writes
// the same logs; a run resumed after a crash that left stale logs and a
// temporary file ends with the same logs too.
func TestRolloutLogs(t *testing.T) {
	agents := []string{"gpt-char", "gpt-char-early", "llama-bpe"}
	var algo hacpo.Settings
	train := func(out string, resume bool) {
		t.Helper()
		run, err := New(context.Background(), exampleConfig(t, out), Options{Resume: resume})
		if err != nil {
			t.Fatal(err)
		}
		algo = run.algo
		run.gradHook = poison("gpt-char-early", 1) // step 1: one skipped update
		if _, err := run.Train(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	outA := filepath.Join(t.TempDir(), "a")
	train(outA, false)
	if steps, err := rollout.LogSteps(outA); err != nil || !slices.Equal(steps, []int{1, 2, 3}) {
		t.Fatalf("logged steps %v (%v), want [1 2 3]", steps, err)
	}
	logs, vals := readLogs(t, outA), stepMetrics(t, outA)
	for s := 1; s <= 3; s++ {
		checkLog(t, s, logs[s], agents, vals[s], 4, 2, algo)
	}
	// The skipped update is marked, for gpt-char-early only, and only at step 1.
	skipped := map[string]int{}
	var rewarded, truncated int
	for s, recs := range logs {
		for _, r := range recs {
			if r.Reward > 0 {
				rewarded++
			}
			if r.Truncated {
				truncated++
			}
			for _, u := range r.Learners {
				if u.Skipped {
					skipped[fmt.Sprintf("%d/%s/m%d", s, u.Learner, u.Update)]++
				}
			}
		}
	}
	if len(skipped) != 1 || skipped["1/gpt-char-early/m1"] != 8 {
		t.Errorf("skipped samples %v, want the 8 of gpt-char-early's update 1 at step 1", skipped)
	}
	if rewarded == 0 || truncated == 0 {
		t.Errorf("%d rewarded and %d truncated responses: the run does not exercise the log", rewarded, truncated)
	}
	// Round trip: writing what was read gives the same file.
	tmp := filepath.Join(t.TempDir(), "step-00000002.jsonl.gz")
	if err := rollout.WriteLog(tmp, logs[2]); err != nil {
		t.Fatal(err)
	}
	if logText(t, tmp) != logText(t, rollout.LogPath(outA, 2)) {
		t.Errorf("rewriting step 2's records changed them")
	}

	// Same seed, same logs; and a resume from step 2 after a crash that left a
	// stale step-3 log and a temporary file rewrites them to the same.
	outB := filepath.Join(t.TempDir(), "b")
	train(outB, false)
	same := func(what string) {
		t.Helper()
		for s := 1; s <= 3; s++ {
			if a, b := logText(t, rollout.LogPath(outA, s)), logText(t, rollout.LogPath(outB, s)); a != b {
				t.Errorf("%s: step %d logs differ", what, s)
			}
		}
	}
	same("two runs with the same seed")
	if err := os.RemoveAll(filepath.Join(outB, "checkpoints", "step-00000003")); err != nil {
		t.Fatal(err)
	}
	for _, s := range []int{3, 9} { // a stale log the run rewrites, and one it never reaches
		if err := rollout.WriteLog(rollout.LogPath(outB, s), logs[1][:2]); err != nil {
			t.Fatal(err)
		}
	}
	stray := filepath.Join(outB, rollout.LogDir, ".step-00000003.jsonl.gz.tmp-42")
	if err := os.WriteFile(stray, []byte("half a file"), 0o644); err != nil {
		t.Fatal(err)
	}
	train(outB, true)
	same("resumed from step 2")
	if steps, _ := rollout.LogSteps(outB); !slices.Equal(steps, []int{1, 2, 3}) {
		t.Errorf("after the resume, logged steps %v, want [1 2 3]", steps)
	}
	if _, err := os.Stat(stray); err == nil {
		t.Errorf("the resumed run left %s", stray)
	}
}

// TestRolloutLogsSchedule: rollouts.every picks the steps; a method that does
// not share rollouts logs its learner alone; 0 writes nothing. The untrained
// agents' text often does not survive another tokenizer, which the logs mark.
func TestRolloutLogsSchedule(t *testing.T) {
	agents := []string{"gpt-char", "llama-char", "llama-bpe"}
	for _, tc := range []struct {
		method string
		every  int
		want   []int
	}{
		{"gspo", 2, []int{2}},
		{"grpo", 3, []int{3}},
		{"naive", 3, []int{3}},
		{"no-cross-clip", 3, []int{3}},
		{"gspo", 0, nil},
	} {
		cfg := tinyConfig(t, t.TempDir(), tc.method, 3)
		cfg.Eval.Sets = nil
		cfg.Rollouts.Every = tc.every
		run, err := New(context.Background(), cfg, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := run.Train(context.Background()); err != nil {
			t.Fatal(err)
		}
		steps, err := rollout.LogSteps(cfg.Out)
		if err != nil || !slices.Equal(steps, tc.want) {
			t.Errorf("%s every %d: logged steps %v (%v), want %v", tc.method, tc.every, steps, err, tc.want)
		}
		if tc.every == 0 {
			if _, err := os.Stat(filepath.Join(cfg.Out, rollout.LogDir)); err == nil {
				t.Errorf("rollouts off, but %s exists", rollout.LogDir)
			}
		}
		logs, vals := readLogs(t, cfg.Out), stepMetrics(t, cfg.Out)
		for _, s := range steps {
			checkLog(t, s, logs[s], agents, vals[s], 4, 2, run.algo)
		}
	}
}
