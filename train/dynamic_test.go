package train

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/hacpo"
	"github.com/hacrl/hacrl/metrics"
	"github.com/hacrl/hacrl/rollout"
	"github.com/hacrl/hacrl/task"
)

// wideMetrics returns each step's run-wide training record (time/step's).
func wideMetrics(t *testing.T, out string) map[int]map[string]float64 {
	t.Helper()
	recs, err := metrics.ReadFile(filepath.Join(out, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	m := map[int]map[string]float64{}
	for _, r := range recs {
		if _, ok := r.Values["time/step"]; ok && r.Agent == "" {
			m[r.Step] = r.Values
		}
	}
	return m
}

// taskReward is the task's own reward of a logged response, recomputed
// with the task's checker.
func taskReward(t *testing.T, tk task.Task, rec rollout.Record) float64 {
	t.Helper()
	return tk.Reward(task.Problem{ID: rec.ProblemID, Question: rec.Question, Answer: rec.Answer}, rec.Response)
}

// dynamicRun is a 3-step run of the three warm-started example agents
// (exampleConfig) with method under dynamic sampling in at most rounds
// rounds (and an overlong buffer of 10 tokens), its rollouts logged at
// every step.
func dynamicRun(t *testing.T, out, method string, rounds int, resume bool) *Run {
	t.Helper()
	cfg := exampleConfig(t, out)
	cfg.Method.Name = method
	on, buffer := true, 10
	cfg.Method.DynamicSampling, cfg.Method.MaxSampleRounds = &on, &rounds
	// With DAPO's penalty on, a ramp of 10 of the early agent's 12 tokens
	// tells apart most responses a filter on the shaped rewards would keep.
	cfg.Method.OverlongBuffer = &buffer
	run, err := New(context.Background(), cfg, Options{Resume: resume})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	return run
}

// TestDynamicSampling: under dynamic sampling every logged prompt group
// carries a signal by the method's rule (a joint group of unequal task
// rewards for HACPO, some agent's own unequal ones for DAPO), the step
// trains on exactly those groups, the run-wide metrics count its rounds and
// its sampled and kept prompts, the capability takes every response the step
// sampled, and the run is deterministic and resumes bit for bit.
func TestDynamicSampling(t *testing.T) {
	agents := []string{"gpt-char", "gpt-char-early", "llama-bpe"}
	const B, G, miniBatch = 4, 2, 8
	for _, tc := range []struct {
		method string
		rounds int
		short  bool // some step runs out of rounds short of prompts
	}{
		{"hacpo", 2, false},
		{"dapo", 3, true}, // with the soft overlong punishment on, filtering on the task's rewards
	} {
		t.Run(tc.method, func(t *testing.T) {
			outA := filepath.Join(t.TempDir(), "a")
			run := dynamicRun(t, outA, tc.method, tc.rounds, false)
			algo := run.algo
			tk, err := BuildTask(run.cfg)
			if err != nil {
				t.Fatal(err)
			}
			logs, vals, wide := readLogs(t, outA), stepMetrics(t, outA), wideMetrics(t, outA)
			var dropped, short, later int
			for s := 1; s <= 3; s++ {
				w := wide[s]
				rounds, sampled, kept := int(w["dynamic/rounds"]), int(w["dynamic/sampled_prompts"]), int(w["dynamic/kept_prompts"])
				t.Logf("step %d: %d rounds, %d prompts sampled, %d kept", s, rounds, sampled, kept)
				if rounds < 1 || rounds > tc.rounds || sampled != rounds*B || kept > B {
					t.Fatalf("step %d: %d rounds, %d sampled, %d kept: want 1..%d rounds of %d prompts, at most %d kept", s, rounds, sampled, kept, tc.rounds, B, B)
				}
				if kept < B && rounds < tc.rounds {
					t.Errorf("step %d: %d of %d prompts kept after %d of %d rounds: it stopped early", s, kept, B, rounds, tc.rounds)
				}
				dropped += sampled - kept
				if kept < B {
					short++
				}
				recs := logs[s]
				if len(recs) != kept*len(agents)*G {
					t.Fatalf("step %d: %d logged responses, want %d kept prompts × %d agents × %d", s, len(recs), kept, len(agents), G)
				}
				// Per prompt: the task's rewards by agent, and the problem.
				groups := make([]map[string][]float64, kept)
				ids := make([]string, kept)
				uses := map[string]map[int]bool{}
				for n, r := range recs {
					wantPrompt, wantAgent, wantSample := n/(len(agents)*G), agents[n/G%len(agents)], n%G
					if r.Prompt != wantPrompt || r.Agent != wantAgent || r.Sample != wantSample {
						t.Fatalf("step %d record %d: prompt %d agent %s sample %d, want %d %s %d", s, n, r.Prompt, r.Agent, r.Sample, wantPrompt, wantAgent, wantSample)
					}
					if groups[r.Prompt] == nil {
						groups[r.Prompt] = map[string][]float64{}
						ids[r.Prompt] = r.ProblemID
					}
					groups[r.Prompt][r.Agent] = append(groups[r.Prompt][r.Agent], taskReward(t, tk, r))
					// Every learner that may use the response trained on it.
					var learners []string
					for _, u := range r.Learners {
						if u.Skipped {
							t.Errorf("step %d record %d: %s skipped it", s, n, u.Learner)
						}
						learners = append(learners, u.Learner)
						if uses[u.Learner] == nil {
							uses[u.Learner] = map[int]bool{}
						}
						uses[u.Learner][u.Update] = true
					}
					want := agents
					if !algo.SharesRollouts {
						want = []string{r.Agent}
					}
					if !slices.Equal(learners, want) {
						t.Errorf("step %d record %d: learners %v, want %v", s, n, learners, want)
					}
				}
				for p, g := range groups {
					if !signal(g, algo.SharesRollouts) {
						t.Errorf("step %d prompt %d (%s): task rewards %v carry no signal, yet it was kept", s, p, ids[p], g)
					}
				}
				// Round 0's prompts are the step's own draws, in order; later
				// rounds' come after them, from their own stream.
				first := true
				last := -1
				for p, id := range ids {
					pos, err := strconv.Atoi(id[strings.LastIndexByte(id, '/')+1:])
					if err != nil {
						t.Fatalf("problem id %q", id)
					}
					own := pos >= (s-1)*B && pos < s*B
					if own && (!first || pos <= last) {
						t.Errorf("step %d prompt %d: problem %s of the step's own draw after %v", s, p, id, ids[:p])
					}
					if !own {
						if pos < extraBase {
							t.Errorf("step %d prompt %d: problem %s is neither the step's nor a later round's", s, p, id)
						}
						first = false
						later++
					}
					last = pos
				}
				// Each learner's updates: its kept sequences in mini-batches.
				for _, a := range agents {
					seqs := kept * G
					if algo.SharesRollouts {
						seqs *= len(agents)
					}
					wantUpdates := (seqs + miniBatch - 1) / miniBatch
					if got := vals[s][a]["updates"]; got != float64(wantUpdates) || len(uses[a]) != wantUpdates {
						t.Errorf("step %d %s: %v updates (the log shows %d), want %d for %d kept sequences", s, a, got, len(uses[a]), wantUpdates, seqs)
					}
					if algo.OverlongPenalty == 0 {
						// The capability is the mean over the window (5 steps, all
						// of these) of each step's accuracy over every response
						// sampled, dropped prompts' too (rewards of 0 or 1).
						sum := 0.0
						for i := 1; i <= s; i++ {
							sum += math.Max(vals[i][a]["accuracy/train"], 1e-8)
						}
						if got, want := vals[s][a]["capability"], sum/float64(s); math.Abs(got-want) > 1e-12 {
							t.Errorf("step %d %s: capability %v, want the mean accuracy over every response sampled, %v", s, a, got, want)
						}
					}
				}
			}
			if dropped == 0 || later == 0 || (short > 0) != tc.short {
				t.Errorf("%d prompts dropped, %d kept from later rounds, %d steps short of prompts: the run does not exercise dynamic sampling as meant", dropped, later, short)
			}
			if algo.OverlongPenalty > 0 && checkOverlong(t, tk, run.cfg, algo, logs, vals, false) == 0 {
				t.Errorf("no kept response was penalised: the run does not show that the filter ignores the penalty")
			}
			t.Logf("%d prompts dropped, %d steps short of prompts, %d prompts from later rounds", dropped, short, later)

			// Same seed, same run; and a resume from step 2 the same too.
			outB := filepath.Join(t.TempDir(), "b")
			dynamicRun(t, outB, tc.method, tc.rounds, false)
			sameRun(t, "two runs with the same seed", outA, outB, 3)
			if err := os.RemoveAll(filepath.Join(outB, "checkpoints", "step-00000003")); err != nil {
				t.Fatal(err)
			}
			dynamicRun(t, outB, tc.method, tc.rounds, true)
			sameRun(t, "resumed from step 2", outA, outB, 3)
		})
	}
}

// signal reports whether a prompt's task rewards, by agent, can teach a
// learner: for a method that shares rollouts, they are not all equal; for
// one that does not, some agent's are not.
func signal(g map[string][]float64, shared bool) bool {
	var all []float64
	for _, rs := range g {
		if slices.Min(rs) != slices.Max(rs) {
			return true
		}
		all = append(all, rs...)
	}
	return shared && slices.Min(all) != slices.Max(all)
}

// sameRun asserts that two run directories hold the same metrics (timing
// aside) and rollout logs for steps 1..steps.
func sameRun(t *testing.T, what, a, b string, steps int) {
	t.Helper()
	ra, err := metrics.ReadFile(filepath.Join(a, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	rb, err := metrics.ReadFile(filepath.Join(b, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if da, db := deterministic(ra), deterministic(rb); !reflect.DeepEqual(da, db) {
		for i := range min(len(da), len(db)) {
			if !reflect.DeepEqual(da[i], db[i]) {
				t.Errorf("%s: metrics record %d differs:\n%v\n%v", what, i, da[i], db[i])
				break
			}
		}
		if len(da) != len(db) {
			t.Errorf("%s: %d metrics records against %d", what, len(da), len(db))
		}
	}
	for s := 1; s <= steps; s++ {
		if logText(t, rollout.LogPath(a, s)) != logText(t, rollout.LogPath(b, s)) {
			t.Errorf("%s: step %d's rollout logs differ", what, s)
		}
	}
}

// checkOverlong asserts that every logged reward is the task's reward plus
// DAPO's overlong penalty, min(−(L − (max − buffer))/buffer · factor, 0) for
// a response of L tokens of an agent with max max_new_tokens, and, when the
// logs hold every response sampled (complete), that each agent's
// reward/overlong_penalty is the mean penalty over its responses; it
// returns how many responses were penalised.
func checkOverlong(t *testing.T, tk task.Task, cfg *config.Config, algo hacpo.Settings, logs map[int][]rollout.Record, vals map[int]map[string]map[string]float64, complete bool) int {
	t.Helper()
	maxNew := map[string]int{}
	for _, a := range cfg.Agents {
		maxNew[a.Name] = a.Sampling.MaxNewTokens
	}
	penalised := 0
	for s, recs := range logs {
		sum, n := map[string]float64{}, map[string]int{}
		for i, r := range recs {
			exceed := float64(r.Tokens - (maxNew[r.Agent] - algo.OverlongBuffer))
			penalty := math.Max(0, exceed/float64(algo.OverlongBuffer)*algo.OverlongPenalty)
			if want := taskReward(t, tk, r) - penalty; math.Abs(r.Reward-want) > 1e-12 {
				t.Errorf("step %d record %d (%s, %d of %d tokens): reward %v, want the task's %v less %v", s, i, r.Agent, r.Tokens, maxNew[r.Agent], r.Reward, taskReward(t, tk, r), penalty)
			}
			if penalty > 0 {
				penalised++
			}
			sum[r.Agent] += penalty
			n[r.Agent]++
		}
		for a, c := range n {
			if !complete {
				break
			}
			if got, want := vals[s][a]["reward/overlong_penalty"], sum[a]/float64(c); math.Abs(got-want) > 1e-12 {
				t.Errorf("step %d %s: reward/overlong_penalty %v, the log gives %v", s, a, got, want)
			}
		}
	}
	return penalised
}

// TestOverlongPenalty: with DAPO's soft overlong punishment on, every reward
// of a HACPO run (the rollout log's, which the advantages used) is the
// task's plus the penalty of the response's length, and reward/mean is
// their mean. The early agent's 12 new tokens with a buffer of 4 penalise
// many of its responses; the other agents' limits some.
func TestOverlongPenalty(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	cfg := exampleConfig(t, out)
	factor, buffer := 0.5, 4
	cfg.Method.OverlongPenalty, cfg.Method.OverlongBuffer = &factor, &buffer
	run := mustTrain(t, cfg)
	if run.algo.OverlongPenalty != factor || run.algo.OverlongBuffer != buffer {
		t.Fatalf("the method has overlong penalty %v and buffer %d, want %v and %d", run.algo.OverlongPenalty, run.algo.OverlongBuffer, factor, buffer)
	}
	if want := "overlong penalty: a response loses up to 0.5 reward over its last 4 tokens"; !strings.Contains(run.Plan(), want) {
		t.Errorf("the plan lacks %q:\n%s", want, run.Plan())
	}
	tk, err := BuildTask(cfg)
	if err != nil {
		t.Fatal(err)
	}
	logs, vals := readLogs(t, out), stepMetrics(t, out)
	agents := []string{"gpt-char", "gpt-char-early", "llama-bpe"}
	for s := 1; s <= 3; s++ {
		checkLog(t, s, logs[s], agents, vals[s], 4, 2, run.algo)
	}
	if n := checkOverlong(t, tk, cfg, run.algo, logs, vals, true); n == 0 {
		t.Errorf("no response was penalised: the run does not exercise the penalty")
	} else {
		t.Logf("%d of %d responses penalised", n, 3*len(logs[1]))
	}
}

// TestDynamicSamplingKeepsNothing: untrained agents earn no reward, so
// every group is uniform and dynamic sampling keeps no prompt in its
// rounds: each step counts its rounds and sampled prompts, keeps none,
// updates no agent, logs no response, and still writes finite metrics.
func TestDynamicSamplingKeepsNothing(t *testing.T) {
	for _, method := range []string{"hacpo", "grpo"} {
		t.Run(method, func(t *testing.T) {
			cfg := tinyConfig(t, t.TempDir(), method, 2)
			cfg.Eval.Sets = nil
			cfg.Rollouts.Every = 1
			on, rounds := true, 2
			cfg.Method.DynamicSampling, cfg.Method.MaxSampleRounds = &on, &rounds
			run := mustTrain(t, cfg)
			if want := "dynamic sampling: the step keeps the prompts whose rewards differ, sampling up to 2 rounds of 4 prompts to keep 4"; !strings.Contains(run.Plan(), want) {
				t.Errorf("the plan lacks %q:\n%s", want, run.Plan())
			}
			recs, err := metrics.ReadFile(filepath.Join(cfg.Out, "metrics.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			agents := []string{"gpt-char", "llama-char", "llama-bpe"}
			checkSchema(t, recs, agents, method == "hacpo")
			vals, wide, logs := stepMetrics(t, cfg.Out), wideMetrics(t, cfg.Out), readLogs(t, cfg.Out)
			for s := 1; s <= 2; s++ {
				w := wide[s]
				if w["dynamic/rounds"] != 2 || w["dynamic/sampled_prompts"] != 8 || w["dynamic/kept_prompts"] != 0 {
					t.Errorf("step %d: %v rounds, %v prompts sampled, %v kept; want 2, 8 and 0", s, w["dynamic/rounds"], w["dynamic/sampled_prompts"], w["dynamic/kept_prompts"])
				}
				if len(logs[s]) != 0 {
					t.Errorf("step %d: %d responses logged, want none", s, len(logs[s]))
				}
				for _, a := range agents {
					v := vals[s][a]
					if v["reward/mean"] != 0 || v["accuracy/train"] != 0 {
						t.Fatalf("step %d %s: reward %v, accuracy %v: an untrained agent was rewarded", s, a, v["reward/mean"], v["accuracy/train"])
					}
					if v["updates"] != 0 || v["grad_norm"] != 0 {
						t.Errorf("step %d %s: %v updates, gradient norm %v; want none", s, a, v["updates"], v["grad_norm"])
					}
					for k, x := range v {
						if math.IsNaN(x) || math.IsInf(x, 0) {
							t.Errorf("step %d %s: %s = %v", s, a, k, x)
						}
					}
				}
			}
		})
	}
}

// TestDynamicSamplingRefused: dynamic sampling with agents as processes,
// or under the original semantics, fails before any work, naming the key.
func TestDynamicSamplingRefused(t *testing.T) {
	on := true
	cfg := tinyConfig(t, t.TempDir(), "hacpo", 1)
	cfg.Method.DynamicSampling = &on
	_, err := New(context.Background(), cfg, Options{Member: &Member{Agent: "gpt-char", Exchange: newMemExchange(cfg.AgentNames())}})
	if err == nil || !strings.Contains(err.Error(), "method") || !strings.Contains(err.Error(), "dynamic sampling") || !strings.Contains(err.Error(), "processes") {
		t.Errorf("a member process with dynamic sampling: error %v, want one naming method.dynamic_sampling and the processes", err)
	} else {
		t.Log(err)
	}
	cfg = tinyConfig(t, t.TempDir(), "hacpo", 1)
	cfg.Method.DynamicSampling = &on
	cfg.Method.Semantics = "original"
	_, err = New(context.Background(), cfg, Options{})
	if err == nil || !strings.Contains(err.Error(), "dynamic sampling") || !strings.Contains(err.Error(), "original") {
		t.Errorf("original semantics with dynamic sampling: error %v", err)
	}
	if entries, _ := os.ReadDir(cfg.Out); len(entries) > 1 {
		t.Errorf("a refused run wrote into OUT: %v", entries)
	}
}

// TestLaterRoundProblems: a later sampling round's problems are a function
// of (seed, step, round): from a dataset, distinct ones of those in use
// (too_long: drop leaves some out) until the dataset is exhausted, then a
// fresh draw; from a generated task, positions no step draws.
func TestLaterRoundProblems(t *testing.T) {
	dir := t.TempDir()
	var qs []string
	dropped := map[string]bool{}
	for i := range 12 {
		q := fmt.Sprintf("%d+%d", i, i)
		if i%4 == 1 { // far beyond any agent's 48-token context
			q = strings.Repeat(q+"+", 40) + "1"
			dropped[fmt.Sprintf("train/%d", i)] = true
		}
		qs = append(qs, q)
	}
	on := true
	cfg := tinyConfig(t, dir, "hacpo", 3)
	cfg.Eval.Sets = nil
	cfg.Method.DynamicSampling = &on
	cfg.Task, cfg.Dataset = nil, &config.Dataset{Path: writeLines(t, dir, qs), TooLong: "drop"}
	run, err := New(context.Background(), cfg, Options{Observer: &recorder{}})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	ids := func(ps []task.Problem) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.ID)
		}
		return out
	}
	draws := map[string]bool{}
	for step := range 3 {
		for rnd := 1; rnd < 3; rnd++ {
			got := ids(run.extraProblems(step, rnd))
			if again := ids(run.extraProblems(step, rnd)); !slices.Equal(got, again) {
				t.Errorf("step %d round %d: %v, then %v", step, rnd, got, again)
			}
			seen := map[string]bool{}
			for _, id := range got {
				if dropped[id] || seen[id] {
					t.Errorf("step %d round %d: %v holds a dropped or repeated problem %s", step, rnd, got, id)
				}
				seen[id] = true
			}
			if len(got) != 4 {
				t.Errorf("step %d round %d: %d problems, want 4", step, rnd, len(got))
			}
			draws[strings.Join(got, " ")] = true
		}
	}
	if len(draws) < 5 {
		t.Errorf("6 rounds drew only %d different sets of problems: %v", len(draws), draws)
	}
	// More prompts than problems in use: all 9 once, then 3 of a new draw.
	run.cfg.Batch.PromptsPerStep = 12
	got := ids(run.extraProblems(0, 1))
	whole := slices.Clone(got[:9])
	slices.Sort(whole)
	if want := []string{"train/0", "train/10", "train/11", "train/2", "train/3", "train/4", "train/6", "train/7", "train/8"}; !slices.Equal(whole, want) {
		t.Errorf("the first 9 of 12 problems drawn from 9 in use: %v, want each once", got)
	}
	if rest := got[9:]; rest[0] == rest[1] || rest[1] == rest[2] || rest[0] == rest[2] {
		t.Errorf("the last 3 of 12 problems drawn from 9 in use repeat: %v", got)
	}

	// A generated task: positions from extraBase on, apart from the steps'.
	cfg = tinyConfig(t, t.TempDir(), "hacpo", 2)
	cfg.Eval.Sets = nil
	cfg.Method.DynamicSampling = &on
	if run, err = New(context.Background(), cfg, Options{}); err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	for _, p := range run.extraProblems(1, 2) {
		pos, err := strconv.Atoi(p.ID[strings.LastIndexByte(p.ID, '/')+1:])
		if err != nil || pos < extraBase {
			t.Errorf("a later round of a generated task drew problem %s, want a position from %d on", p.ID, extraBase)
		}
	}
}
