package train

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/metrics"
)

// pythonPath is the python3 interpreter itself (a pyenv shim can take a
// second to start).
func pythonPath(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("python3, which runs the test's reward command, does not run: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// rewardConfig is a 2-step run of the two example agents with the reward
// section given.
func rewardConfig(t *testing.T, dir, reward string) *config.Config {
	t.Helper()
	src := fmt.Sprintf(`
seed: 3
out: %s
steps: 2
task: {name: arith, digits: 2, operators: "+-"}
batch: {prompts_per_step: 2, responses_per_prompt: 2, mini_batch: 8}
agents:
  - name: gpt-char
    checkpoint: ../examples/agents/gpt-char
    optimizer: {lr: 0.0001}
    sampling: {max_new_tokens: 24}
  - name: llama-bpe
    checkpoint: ../examples/agents/llama-bpe
    template: {kind: chat}
    optimizer: {lr: 0.0001}
    sampling: {max_new_tokens: 24}
eval:
  sets: [{name: test, split: test, problems: 3}]
checkpoint: {keep: 1}
%s
`, filepath.Join(dir, "out"), reward)
	cfg, err := config.Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// loggedRequest is one line of testdata/logreward.py's log.
type loggedRequest struct {
	Purpose string
	Step    int
	Items   []struct {
		ID        int
		Reward    float64
		Correct   bool
		Agent     string
		Response  string
		ProblemID string `json:"problem_id"`
		Reference *string
		Truncated bool
		Tokens    int
	}
}

func TestExternalRewardRun(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "reward.log")
	cfg := rewardConfig(t, dir, fmt.Sprintf("reward: {command: [%s, testdata/logreward.py, %s], batch_size: 3, eval: true, timeout: 30s}",
		pythonPath(t), logPath))
	run, err := New(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	var reqs []loggedRequest
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var r loggedRequest
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, r)
	}
	recs, err := metrics.ReadFile(filepath.Join(cfg.Out, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}

	// Per step and agent: the training rewards the command gave, in the
	// metrics; 8 responses per step in requests of at most 3.
	type key struct {
		step  int
		agent string
	}
	sum, correct, count := map[key]float64{}, map[key]float64{}, map[key]float64{}
	calls := map[int]int{}
	evalCorrect := map[key][]bool{}
	for _, r := range reqs {
		if r.Purpose == "start" {
			if len(r.Items) != 0 {
				t.Errorf("start request with %d items", len(r.Items))
			}
			continue
		}
		for _, it := range r.Items {
			if want := float64(utf8.RuneCountInString(it.Response)%7) / 6; it.Reward != want {
				t.Fatalf("logged reward %v for %q", it.Reward, it.Response)
			}
			if it.Reference == nil || it.Tokens <= 0 || it.Tokens > 24 {
				t.Errorf("item %+v", it)
			}
			k := key{r.Step, it.Agent}
			switch r.Purpose {
			case "train":
				if !strings.HasPrefix(it.ProblemID, "arith/train/") {
					t.Errorf("train item of problem %s", it.ProblemID)
				}
				sum[k] += it.Reward
				count[k]++
				if it.Correct {
					correct[k]++
				}
			case "eval":
				if !strings.HasPrefix(it.ProblemID, "arith/test/") {
					t.Errorf("eval item of problem %s", it.ProblemID)
				}
				evalCorrect[k] = append(evalCorrect[k], it.Correct)
			default:
				t.Errorf("purpose %q", r.Purpose)
			}
		}
		if r.Purpose == "train" {
			calls[r.Step]++
		}
	}
	seen := 0
	for _, rec := range recs {
		_, isStep := rec.Values["reward/mean"]
		switch {
		case rec.Agent == "" && rec.Values["time/step"] > 0:
			if rec.Values["reward/calls"] != 3 || calls[rec.Step] != 3 || !(rec.Values["time/reward"] > 0) {
				t.Errorf("step %d: reward/calls %v (requests logged %d), time/reward %v", rec.Step, rec.Values["reward/calls"], calls[rec.Step], rec.Values["time/reward"])
			}
		case rec.Agent != "" && isStep:
			k := key{rec.Step, rec.Agent}
			if count[k] != 4 {
				t.Fatalf("step %d agent %s: %v responses scored, want 4", rec.Step, rec.Agent, count[k])
			}
			if got, want := rec.Values["reward/mean"], sum[k]/count[k]; math.Abs(got-want) > 1e-12 {
				t.Errorf("step %d agent %s: reward/mean %v, the command gave %v", rec.Step, rec.Agent, got, want)
			}
			if got, want := rec.Values["accuracy/train"], correct[k]/count[k]; got != want {
				t.Errorf("step %d agent %s: accuracy/train %v, the command said %v", rec.Step, rec.Agent, got, want)
			}
			seen++
		case rec.Agent != "" && rec.Values["time/eval"] > 0:
			k := key{rec.Step, rec.Agent}
			c := evalCorrect[k]
			if len(c) != 3 {
				t.Fatalf("eval at step %d of %s: %d responses went to the reward, want 3", rec.Step, rec.Agent, len(c))
			}
			n := 0.0
			for _, ok := range c {
				if ok {
					n++
				}
			}
			if got := rec.Values["eval/test/greedy_acc"]; got != n/3 {
				t.Errorf("eval at step %d of %s: greedy_acc %v, the command said %v of 3 correct", rec.Step, rec.Agent, got, n)
			}
		}
	}
	if seen != 4 {
		t.Errorf("%d step records of agents, want 4", seen)
	}
	if len(evalCorrect) != 4 { // at start and at the end, two agents
		t.Errorf("evaluations scored by the reward: %d, want 4", len(evalCorrect))
	}
}

func TestExternalRewardCrash(t *testing.T) {
	dir := t.TempDir()
	cfg := rewardConfig(t, dir, fmt.Sprintf("reward: {command: [%s, ../reward/testdata/misbehave.py, crash]}", pythonPath(t)))
	cfg.Eval.Sets = nil
	run, err := New(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = run.Train(context.Background())
	for _, want := range []string{"step 1: reward command [", "misbehave.py crash]", "exited (exit status 3)", "misbehave: something broke on item 0"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

func TestExternalRewardMissing(t *testing.T) {
	dir := t.TempDir()
	cfg := rewardConfig(t, dir, "reward: {command: [hacrl-no-such-reward], start_timeout: 5s}")
	run, err := New(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = run.Train(context.Background())
	if err == nil || !strings.Contains(err.Error(), "reward command [hacrl-no-such-reward]: cannot start") {
		t.Fatalf("error: %v", err)
	}
	// It failed before any step or evaluation.
	if recs, _ := metrics.ReadFile(filepath.Join(cfg.Out, "metrics.jsonl")); len(recs) != 0 {
		t.Errorf("%d metric records written", len(recs))
	}
}

// TestEvalJudgeChoice: with reward.eval, the task's splits and dataset files
// go to the external reward, benchmarks keep the math verifier; without it,
// every set keeps its task's checker.
func TestEvalJudgeChoice(t *testing.T) {
	dir := t.TempDir()
	cfg := rewardConfig(t, dir, "reward: {command: [hacrl-never-started], eval: true}")
	c, err := newRewardClient(cfg, logObserver{})
	if err != nil {
		t.Fatal(err)
	}
	tk, err := BuildTask(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := tk.Problem("test", 0)
	rs := []response{{problem: p, agent: &Agent{Name: "a"}, text: "#### " + p.Answer, stopped: true}}
	for _, tc := range []struct {
		set      config.EvalSet
		eval     bool
		external bool
	}{
		{config.EvalSet{Split: "test"}, true, true},
		{config.EvalSet{Dataset: "x.jsonl"}, true, true},
		{config.EvalSet{Benchmark: "gsm8k"}, true, false},
		{config.EvalSet{Split: "test"}, false, false},
	} {
		cfg.Reward.Eval = tc.eval
		r := &Run{cfg: cfg, reward: c}
		res, err := r.evalJudge(&evalSet{cfg: tc.set, task: tk}, 0)(context.Background(), rs)
		if tc.external {
			// The client was never started: the request cannot go out.
			if err == nil || !strings.Contains(err.Error(), "reward command [hacrl-never-started]") {
				t.Errorf("%+v eval %v: %v, want the external reward's error", tc.set, tc.eval, err)
			}
			continue
		}
		if err != nil || len(res) != 1 || res[0].Reward != 1 || !res[0].Correct {
			t.Errorf("%+v eval %v: %+v %v, want the task's checker", tc.set, tc.eval, res, err)
		}
	}
}
