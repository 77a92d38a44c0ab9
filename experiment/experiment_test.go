package experiment

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

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

	results, err := Collect(c, io.Discard)
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
	checkArchive(t, r, c, results)
	checkInterrupt(t, bin, src)
	md, err := Report(context.Background(), c, results)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Setting: size", "| small | initial |", "| large | hacpo |", "| large | gspo2x |",
		"## Ablations on setting size", "| small | alpha-0 |", " ± ", "ratio/cross_mean", " omega |",
		"## The paper's claims, paired by seed", "| hacpo − gspo2x |", "(plots/size_small_test_greedy_acc.png)", "(plots/size_large_test_greedy_acc_ablations.png)",
		"## Effect sizes: 95% confidence intervals over seeds", "| alpha-0 | test/greedy_acc |"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	var back []CellResult
	data, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil || json.Unmarshal(data, &back) != nil || len(back) != 8 {
		t.Errorf("results.json: %v, %d cells", err, len(back))
	}
	for _, f := range []string{"size_small_test_greedy_acc.png", "size_large_test_greedy_acc.svg"} {
		if st, err := os.Stat(filepath.Join(out, "plots", f)); err != nil || st.Size() == 0 {
			t.Errorf("plot %s: %v", f, err)
		}
	}
}

// checkArchive archives the finished grid c, reads the same results back from
// the archive, and resumes the grid there: only a cell the archive lacks is
// trained, and it is archived like the others.
func checkArchive(t *testing.T, r *Runner, c *Config, results []CellResult) {
	t.Helper()
	arch := *c
	arch.Out = filepath.Join(t.TempDir(), "archive")
	n, err := Archive(c, arch.Out)
	if err != nil || n != len(results) {
		t.Fatalf("Archive: %d cells, %v; want %d", n, err, len(results))
	}
	for _, cell := range c.Cells() {
		for _, f := range []string{"metrics.jsonl", "checkpoints", "final"} {
			if _, err := os.Stat(filepath.Join(arch.Dir(cell), f)); !os.IsNotExist(err) {
				t.Errorf("archive of %s has %s (%v)", cell.ID(), f, err)
			}
		}
	}
	back, err := Collect(&arch, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, results) {
		t.Errorf("results from the archive differ from the grid's:\n%+v\n%+v", back, results)
	}
	// Archiving again gives the same bytes.
	cell := c.Cells()[0]
	gz := filepath.Join(arch.Dir(cell), "metrics.jsonl.gz")
	first, _ := os.ReadFile(gz)
	if _, err := Archive(c, arch.Out); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(gz); len(first) == 0 || !bytes.Equal(first, again) {
		t.Errorf("archiving again changed %s", gz)
	}
	// A grid run over the archive trains only the cell it lacks.
	missing := c.Cells()[1]
	if err := os.RemoveAll(arch.Dir(missing)); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	rr := &Runner{Binary: r.Binary, Log: &log}
	if err := rr.Run(context.Background(), &arch); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if !strings.Contains(log.String(), fmt.Sprintf("%d cells, %d done, 1 to run", len(results), len(results)-1)) {
		t.Errorf("run over the archive:\n%s", log.String())
	}
	again, err := Collect(&arch, io.Discard)
	if err != nil || !reflect.DeepEqual(withoutSeconds(again), withoutSeconds(results)) {
		t.Errorf("after retraining %s in the archive: %v\n%+v\nwant\n%+v", missing.ID(), err, again, results)
	}
}

// withoutSeconds drops the cells' times, which differ between two runs of the same cell.
func withoutSeconds(rs []CellResult) []CellResult {
	out := make([]CellResult, len(rs))
	for i, r := range rs {
		r.Seconds = 0
		out[i] = r
	}
	return out
}

func TestChildEnv(t *testing.T) {
	base := []string{"HOME=/root", "GOEXPERIMENT=simd"}
	for _, tc := range []struct {
		env            []string
		parallel, cpus int
		want           string // the GOMAXPROCS entry, "" for none added
	}{
		{base, 1, 2, ""},
		{base, 2, 2, "GOMAXPROCS=1"},
		{base, 2, 16, "GOMAXPROCS=8"},
		{base, 3, 16, "GOMAXPROCS=5"},
		{base, 4, 2, "GOMAXPROCS=1"},
		{append(slices.Clone(base), "GOMAXPROCS=2"), 4, 2, "GOMAXPROCS=2"}, // the caller's setting stands
	} {
		got := childEnv(slices.Clone(tc.env), tc.parallel, tc.cpus)
		var procs []string
		for _, kv := range got {
			if strings.HasPrefix(kv, "GOMAXPROCS=") {
				procs = append(procs, kv)
			}
		}
		switch {
		case tc.want == "" && len(procs) != 0:
			t.Errorf("parallel %d on %d cores: %v, want no GOMAXPROCS", tc.parallel, tc.cpus, procs)
		case tc.want != "" && (len(procs) != 1 || procs[0] != tc.want):
			t.Errorf("parallel %d on %d cores, env %v: %v, want [%s]", tc.parallel, tc.cpus, tc.env, procs, tc.want)
		}
		if !slices.Equal(got[:len(base)], base) {
			t.Errorf("childEnv dropped the grid's environment: %v", got)
		}
	}
}

// checkInterrupt stops a grid of long cells while its first cell trains: the
// cell is reported interrupted (not failed) and resumable, and no other cell
// starts.
func checkInterrupt(t *testing.T, bin, src string) {
	t.Helper()
	dir := t.TempDir()
	long := strings.Replace(strings.Replace(src, "steps: 2\n", "steps: 100000\n", 1), "eval: {every: 1,", "checkpoint: {every: 1}\n  eval: {every: 100000,", 1)
	long = regexp.MustCompile(`(?m)^out: .*$`).ReplaceAllString(long, "out: "+filepath.Join(dir, "grid"))
	path := filepath.Join(dir, "long.yaml")
	if err := os.WriteFile(path, []byte(long), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	c.Parallel = 1
	first := c.Cells()[0]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // cancel once the first cell has checkpointed a step
		for ctx.Err() == nil {
			if m, _ := filepath.Glob(filepath.Join(c.Dir(first), "checkpoints", "step-*")); len(m) > 0 {
				cancel()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	var log bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- (&Runner{Binary: bin, Log: &log}).Run(ctx, c) }()
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		cancel()
		t.Fatalf("the grid did not stop within 2 minutes of starting:\n%s", log.String())
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run after an interrupt = %v, want context.Canceled\n%s", err, log.String())
	}
	if !strings.Contains(log.String(), first.ID()+" interrupted") || strings.Contains(log.String(), "FAILED") {
		t.Errorf("interrupt log:\n%s", log.String())
	}
	if c.Done(first) {
		t.Errorf("an interrupted cell counts as done")
	}
	for _, cell := range c.Cells()[1:] {
		if _, err := os.Stat(c.Dir(cell)); !os.IsNotExist(err) {
			t.Errorf("cell %s started after the interrupt (%v)", cell.ID(), err)
		}
	}
}
