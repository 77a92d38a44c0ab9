package train

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/metrics"
	"github.com/hacrl/hacrl/task"
)

// An evaluation set's task section changes the run's task options for that
// set alone: its problems are the changed task's test problems (never one of
// the run's training problems), judged by the changed task.
func TestEvalSetTask(t *testing.T) {
	run := &config.Task{Name: "arith", Digits: 2, Operators: "+-"}
	cfg := &config.Config{Task: run, Eval: config.Eval{Sets: []config.EvalSet{
		{Name: "test", Split: "test", Problems: 60},
		{Name: "test-add", Split: "test", Problems: 60, Task: &config.Task{Operators: "+"}},
		{Name: "test-sub", Split: "test", Problems: 60, Task: &config.Task{Name: "arith", Operators: "-"}},
		{Name: "train-two-ops", Split: "train", Problems: 60, Task: &config.Task{Ops: 2}},
	}}}
	runTask, err := BuildTask(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sets, err := buildEvalSets(cfg, runTask)
	if err != nil {
		t.Fatal(err)
	}
	training := map[string]bool{}
	for i := range 5000 {
		training[runTask.Problem(task.Train, i).Question] = true
	}
	tests := []struct {
		set           int
		operators     string // every operator of a question is one of these
		ops           int    // operators per question
		direct        task.Options
		split         task.Split
		neverTraining bool
	}{
		{0, "+-", 1, task.Options{Digits: 2, Operators: "+-"}, task.Test, true},
		{1, "+", 1, task.Options{Digits: 2, Operators: "+"}, task.Test, true},
		{2, "-", 1, task.Options{Digits: 2, Operators: "-"}, task.Test, true},
		{3, "+-", 2, task.Options{Digits: 2, Operators: "+-", Ops: 2}, task.Train, false},
	}
	for _, tc := range tests {
		es := sets[tc.set]
		t.Run(es.cfg.Name, func(t *testing.T) {
			direct, err := task.New("arith", tc.direct)
			if err != nil {
				t.Fatal(err)
			}
			if len(es.problems) != 60 {
				t.Fatalf("%d problems, want 60", len(es.problems))
			}
			seen := map[byte]bool{}
			for i, p := range es.problems {
				if want := direct.Problem(tc.split, i); p != want {
					t.Fatalf("problem %d is %+v, want the changed task's %+v", i, p, want)
				}
				n := 0
				for _, c := range []byte(p.Question) {
					if c < '0' || c > '9' {
						n++
						seen[c] = true
						if !strings.ContainsRune(tc.operators, rune(c)) {
							t.Errorf("%s: operator %q outside %q", p.Question, c, tc.operators)
						}
					}
				}
				if n != tc.ops {
					t.Errorf("%s: %d operators, want %d", p.Question, n, tc.ops)
				}
				if tc.neverTraining && training[p.Question] {
					t.Errorf("%s is one of the run's training problems", p.Question)
				}
				if r := es.task.Reward(p, "#### "+p.Answer); r != 1 {
					t.Errorf("%s: the reference answer scores %g", p.Question, r)
				}
			}
			if len(seen) != len(tc.operators) {
				t.Errorf("operators seen %v, want all of %q", seen, tc.operators)
			}
		})
	}
}

func TestEvalSetTaskErrors(t *testing.T) {
	arith := &config.Task{Name: "arith", Digits: 2, Operators: "+-"}
	tests := []struct {
		name string
		cfg  *config.Config
		want string
	}{
		{"bad option", &config.Config{Task: arith, Eval: config.Eval{Sets: []config.EvalSet{
			{Name: "ok", Split: "test", Problems: 5},
			{Name: "bad", Split: "test", Problems: 5, Task: &config.Task{Operators: "/"}},
		}}}, `eval.sets[1].task.operators: must be a non-empty subset of "+-*" without repeats, got "/"`},
		{"dataset run", &config.Config{Eval: config.Eval{Sets: []config.EvalSet{
			{Name: "bad", Split: "test", Problems: 5, Task: &config.Task{Operators: "+"}},
		}}}, "eval.sets[0].task: only for a run with a generated task"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var tk task.Task
			if tc.cfg.Task != nil {
				var err error
				if tk, err = BuildTask(tc.cfg); err != nil {
					t.Fatal(err)
				}
			}
			_, err := buildEvalSets(tc.cfg, tk)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// The complementary agents of examples/experiment (one warm-started on
// addition only, one on subtraction only), evaluated at the start of a run on
// the two halves of the mixed task: each solves part of its own half and none
// of the other's.
func TestComplementaryAgentsPerHalf(t *testing.T) {
	dir := t.TempDir()
	agents := filepath.Join("..", "examples", "experiment", "agents")
	src := fmt.Sprintf(`
seed: 1
out: %s
steps: 1
method: {name: hacpo}
task: {name: arith, digits: 2, operators: "+-"}
batch: {prompts_per_step: 2, responses_per_prompt: 4, mini_batch: 8, micro_batch: 8}
agents:
  - {name: add, checkpoint: %s, optimizer: {lr: 0.0001}, sampling: {max_new_tokens: 40}}
  - {name: sub, checkpoint: %s, optimizer: {lr: 0.0001}, sampling: {max_new_tokens: 40}}
eval:
  every: 0
  sets:
    - {name: test-add, split: test, problems: 40, task: {operators: "+"}}
    - {name: test-sub, split: test, problems: 40, task: {operators: "-"}}
`, filepath.Join(dir, "out"), filepath.Join(agents, "complement-add"), filepath.Join(agents, "complement-sub"))
	cfg, err := config.Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	mustTrain(t, cfg)
	recs, err := metrics.ReadFile(filepath.Join(cfg.Out, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	start := map[string]map[string]float64{}
	for _, r := range recs {
		if r.Step == 0 && r.Agent != "" {
			start[r.Agent] = r.Values
		}
	}
	for _, c := range []struct{ agent, own, other string }{{"add", "test-add", "test-sub"}, {"sub", "test-sub", "test-add"}} {
		own, ok1 := start[c.agent]["eval/"+c.own+"/greedy_acc"]
		other, ok2 := start[c.agent]["eval/"+c.other+"/greedy_acc"]
		if !ok1 || !ok2 {
			t.Fatalf("agent %s: no start evaluation of both halves in %v", c.agent, start[c.agent])
		}
		if own < 0.2 || other != 0 {
			t.Errorf("agent %s: greedy accuracy %.3f on its own half, %.3f on the other; want >= 0.2 and 0", c.agent, own, other)
		}
	}
}
