package experiment

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/task"
	"github.com/hacrl/hacrl/tokenizer"
	"github.com/hacrl/hacrl/train"
)

func TestGridRunsResumesAndReports(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and trains several cells")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "hacrl")
	build := exec.Command("go", "build", "-o", bin, "../cmd/hacrl")
	build.Env = append(os.Environ(), "GOEXPERIMENT=simd")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	tk, err := task.New("arith", task.Options{Digits: 1})
	if err != nil {
		t.Fatal(err)
	}
	var corpus []string
	for i := range 100 {
		p := tk.Problem(task.Train, i)
		corpus = append(corpus, p.Question, p.Solution)
	}
	char, err := tokenizer.NewChar(train.Alphabet(corpus), train.Specials("plain"))
	if err != nil {
		t.Fatal(err)
	}
	tokPath := filepath.Join(dir, "char.json")
	if err := char.Save(tokPath); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "grid")
	src := fmt.Sprintf(`
name: tiny
out: %s
seeds: [1, 2]
parallel: 2
run:
  steps: 2
  task: {name: arith, digits: 1}
  batch: {prompts_per_step: 2, responses_per_prompt: 2, mini_batch: 4}
  backend: go:ops_sequential
  eval: {every: 1, sets: [{name: test, split: test, problems: 4}]}
settings:
  - name: size
    agents:
      - {name: small, model: {family: gpt, dim: 16, layers: 1, heads: 2, max_seq: 40, seed: 1}, tokenizer: %s, optimizer: {lr: 0.001}, sampling: {max_new_tokens: 16}}
      - {name: large, model: {family: gpt, dim: 32, layers: 1, heads: 2, max_seq: 40, seed: 2}, tokenizer: %s, optimizer: {lr: 0.001}, sampling: {max_new_tokens: 16}}
methods: [gspo, gspo2x, hacpo]
ablations:
  setting: size
  variants: [{name: alpha-0, method: {name: hacpo, alpha: 0}}]
`, out, tokPath, tokPath)
	cfgPath := filepath.Join(dir, "grid.yaml")
	if err := os.WriteFile(cfgPath, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(c.Cells()); n != 8 {
		t.Fatalf("%d cells, want 3 methods × 2 seeds + 1 variant × 2 seeds = 8", n)
	}
	var log bytes.Buffer
	r := &Runner{Binary: bin, Log: &log}
	if err := r.Run(context.Background(), c); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	for _, cell := range c.Cells() {
		if !c.Done(cell) {
			t.Errorf("cell %s not done", cell.ID())
		}
	}
	// A grid with one unfinished cell runs only that cell again.
	redo := c.Cells()[3]
	if err := os.Remove(filepath.Join(c.Dir(redo), "done.json")); err != nil {
		t.Fatal(err)
	}
	log.Reset()
	if err := r.Run(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "8 cells, 7 done, 1 to run") || !strings.Contains(log.String(), redo.ID()+" done") {
		t.Errorf("resume log:\n%s", log.String())
	}

	results, err := Collect(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 8 {
		t.Fatalf("%d results", len(results))
	}
	for _, res := range results {
		for name, a := range res.Agents {
			want := 2 * 2 * 2 // steps × prompts × responses
			if res.Method == "gspo2x" {
				want *= 2
			}
			if a.Responses != want {
				t.Errorf("%s %s: %d responses, want %d", res.Cell, name, a.Responses, want)
			}
			if a.Tokens <= 0 || len(a.Curve) != 3 || a.Initial == nil {
				t.Errorf("%s %s: tokens %v, %d evaluations, initial %v", res.Cell, name, a.Tokens, len(a.Curve), a.Initial)
			}
		}
	}
	md, err := Report(context.Background(), c, results)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Setting: size", "| small | initial |", "| large | hacpo |", "| large | gspo2x |",
		"## Ablations on setting size", "| small | alpha-0 |", " ± ", "ratio/cross_mean", " omega |",
		"## The paper's claims, paired by seed", "| hacpo − gspo2x |", "| alpha-0 | test/greedy_acc |"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	var back []CellResult
	data, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil || json.Unmarshal(data, &back) != nil || len(back) != 8 {
		t.Errorf("results.json: %v, %d cells", err, len(back))
	}
	for _, f := range []string{"size_small.png", "size_large.svg"} {
		if st, err := os.Stat(filepath.Join(out, "plots", f)); err != nil || st.Size() == 0 {
			t.Errorf("plot %s: %v", f, err)
		}
	}
}
