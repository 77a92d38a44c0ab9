package train

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/dataset"
	"github.com/hacrl/hacrl/task"
)

// TestDatasetByName trains on a shared data set named in dataset.path.
func TestDatasetByName(t *testing.T) {
	tests := []struct {
		d        config.Dataset
		problems int
		err      string
	}{
		{d: config.Dataset{Path: "math_train", PromptSuffix: dataset.MathSuffix}, problems: 7498},
		{d: config.Dataset{Path: "aime25"}, problems: 30},
		{d: config.Dataset{Path: "math_train", AnswerField: "answer"}, err: "dataset.path: math_train names a shared data set"},
		{d: config.Dataset{Path: "math_training"}, err: "dataset.path: math_training is neither a .jsonl or .parquet file nor a shared data set (aime24, aime25, "},
	}
	for _, tt := range tests {
		t.Run(tt.d.Path, func(t *testing.T) {
			tk, err := BuildTask(&config.Config{Dataset: &tt.d})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error = %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n, _ := task.Len(tk, task.Train); n != tt.problems {
				t.Errorf("%d training problems, want %d", n, tt.problems)
			}
			if n, _ := task.Len(tk, task.Test); n != 0 {
				t.Errorf("%d test problems, want 0", n)
			}
			if p := tk.Problem(task.Train, 0); !strings.HasSuffix(p.Question, tt.d.PromptSuffix) || p.Answer == "" {
				t.Errorf("first problem %+v", p)
			}
		})
	}
}

// An evaluation set's prompt_suffix ends every question of a benchmark or
// a dataset file, and leaves the reference answers alone.
func TestEvalPromptSuffix(t *testing.T) {
	path := filepath.Join(t.TempDir(), "probs.jsonl")
	if err := os.WriteFile(path, []byte(`{"question": "What is 1+1?", "answer": "2"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{Eval: config.Eval{Sets: []config.EvalSet{
		{Name: "gsm8k", Benchmark: "gsm8k", Problems: 3, PromptSuffix: dataset.MathSuffix},
		{Name: "file", Dataset: path, PromptSuffix: "Answer briefly."},
		{Name: "plain", Benchmark: "gsm8k", Problems: 3},
	}}}
	sets, err := buildEvalSets(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, suffix := range []string{" " + dataset.MathSuffix, " Answer briefly.", ""} {
		for _, p := range sets[i].problems {
			if !strings.HasSuffix(p.Question, suffix) || p.Answer == "" {
				t.Errorf("set %s: problem %+v, want a question ending %q", cfg.Eval.Sets[i].Name, p, suffix)
			}
		}
	}
	if q := sets[2].problems[0].Question; strings.Contains(q, dataset.MathSuffix) || sets[0].problems[0].Question != q+" "+dataset.MathSuffix {
		t.Errorf("with and without the suffix: %q and %q", sets[0].problems[0].Question, q)
	}
	if sets[1].problems[0].Question != "What is 1+1? Answer briefly." {
		t.Errorf("dataset question %q", sets[1].problems[0].Question)
	}
}
