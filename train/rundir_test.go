package train

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"github.com/hacrl/hacrl/internal/mounttest"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/internal/checksum"
	"github.com/hacrl/hacrl/internal/runlock"
	"github.com/hacrl/hacrl/metrics"
	"github.com/hacrl/hacrl/model"
)

// recorder is an Observer that keeps the log and can act after a step.
type recorder struct {
	mu     sync.Mutex
	logs   []string
	onStep func(step int)
}

func (r *recorder) Phase(int, string, string) {}
func (r *recorder) Step(step, _ int, _ time.Duration, _ map[string]string) {
	if r.onStep != nil {
		r.onStep(step)
	}
}
func (r *recorder) Log(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logs = append(r.logs, msg)
}
func (r *recorder) String() string { return r.text() }
func (r *recorder) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.logs, "\n")
}

// digest maps every file and directory under dir (but the lock file) to the
// SHA-256 of its content ("dir" for directories).
func digest(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == runlock.FileName {
			return nil
		}
		if d.IsDir() {
			out[rel] = "dir"
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		out[rel] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameTree fails the test when dir no longer holds exactly what before says.
func sameTree(t *testing.T, dir string, before map[string]string) {
	t.Helper()
	after := digest(t, dir)
	for p, h := range before {
		if after[p] != h {
			t.Errorf("%s changed or vanished", p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s appeared", p)
		}
	}
}

// copyTree copies the files under src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// trainWith runs New and Train with opts and a recorder.
func trainWith(t *testing.T, cfg *config.Config, opts Options) (*Summary, *recorder) {
	t.Helper()
	rec := &recorder{}
	opts.Observer = rec
	run, err := New(context.Background(), cfg, opts)
	if err != nil {
		t.Fatalf("%v\nlog:\n%s", err, rec.text())
	}
	sum, err := run.Train(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return sum, rec
}

// trainWithErr builds a run of cfg with opts and trains it, returning what
// failed instead of failing the test.
func trainWithErr(t *testing.T, cfg *config.Config, opts Options) (*Summary, error) {
	t.Helper()
	opts.Observer = &recorder{}
	run, err := New(context.Background(), cfg, opts)
	if err != nil {
		return nil, err
	}
	return run.Train(context.Background())
}

// withAgents is a copy of cfg whose agents can be changed without touching cfg's.
func withAgents(cfg *config.Config) *config.Config {
	c := *cfg
	c.Agents = slices.Clone(cfg.Agents)
	return &c
}

func TestNewRunNeedsAnEmptyOut(t *testing.T) {
	cfg := tinyConfig(t, t.TempDir(), "hacpo", 2)
	cfg.Eval.Sets = nil
	trainWith(t, cfg, Options{})
	before := digest(t, cfg.Out)

	_, err := New(context.Background(), cfg, Options{})
	for _, want := range []string{cfg.Out, "already holds a run", "metrics.jsonl", "step-00000002", "--resume", "--overwrite"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("a new run in a used directory: %v, want an error saying %q", err, want)
		}
	}
	sameTree(t, cfg.Out, before)

	if _, err := New(context.Background(), cfg, Options{Resume: true, Overwrite: true}); err == nil || !strings.Contains(err.Error(), "give one of them") {
		t.Errorf("--resume with --overwrite: %v", err)
	}

	// A file no run writes stops --overwrite, and is kept.
	notes := filepath.Join(cfg.Out, "notes.txt")
	if err := os.WriteFile(notes, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(context.Background(), cfg, Options{Overwrite: true}); err == nil || !strings.Contains(err.Error(), "notes.txt") {
		t.Fatalf("--overwrite of a directory with notes.txt: %v", err)
	}
	if err := os.Remove(notes); err != nil {
		t.Fatal(err)
	}
	sameTree(t, cfg.Out, before)

	// --overwrite starts afresh: nothing of the 2-step run remains.
	short := *cfg
	short.Steps = 1
	if _, err := New(context.Background(), &short, Options{}); err == nil {
		t.Fatal("a new run without --overwrite was accepted")
	}
	trainWith(t, &short, Options{Overwrite: true})
	cks, err := listCheckpoints(cfg.Out)
	if err != nil || len(cks) != 1 || filepath.Base(cks[0]) != "step-00000001" {
		t.Errorf("checkpoints after --overwrite: %v (%v), want only step 1", cks, err)
	}
	recs, err := metrics.ReadFile(filepath.Join(cfg.Out, metrics.FileName))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Step > 1 {
			t.Errorf("metrics of the overwritten run remain: step %d", r.Step)
		}
	}
}

func TestOverwriteTargets(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(base, "home")
	work := filepath.Join(home, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(work, filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Chdir(work)
	for _, c := range []struct {
		out, refusal string // "" = allowed
	}{
		{"/", "root of a file system"},
		{home, "the home directory"},
		{work, "the working directory"},
		{".", "the working directory"},
		{filepath.Join(base, "link"), "the working directory"},
		{base, "which contains"},
		{"..", "the home directory"},
		{filepath.Join(work, "runs", "a"), ""},
		{"runs/b", ""},
		{filepath.Join(base, "elsewhere"), ""},
	} {
		err := checkOverwriteTarget(c.out)
		switch {
		case c.refusal == "" && err != nil:
			t.Errorf("%s: %v", c.out, err)
		case c.refusal != "" && (err == nil || !strings.Contains(err.Error(), c.refusal)):
			t.Errorf("%s: %v, want a refusal naming %q", c.out, err, c.refusal)
		}
	}
}

// clearOut deletes a symbolic link, never what it points to, and keeps an
// experiment cell's config.
func TestClearOutKeepsLinkTargets(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(dir, "precious")
	out := filepath.Join(dir, "out")
	for _, d := range []string{outside, filepath.Join(out, "checkpoints", "step-00000001")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "keep"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(out, "final")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "cell.yaml"), []byte("steps: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lock, err := runlock.Acquire(out)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	if err := checkNewRun(out, true); err != nil {
		t.Fatal(err)
	}
	if err := clearOut(out); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(outside, "keep")); err != nil {
		t.Errorf("a file behind a link was deleted: %v", err)
	}
	if names, _ := outContents(out); !slices.Equal(names, []string{"cell.yaml"}) {
		t.Errorf("after clearOut the directory holds %v, want only the experiment's cell.yaml", names)
	}
	if _, err := os.Stat(filepath.Join(out, runlock.FileName)); err != nil {
		t.Errorf("the lock file went: %v", err)
	}
}

// trainingRelevant are the top-level config fields a resume must not change.
// Every field of config.Config is either here or in resumeMayChange: a new
// field fails this test until it is classified.
var trainingRelevant = []string{"seed", "method", "task", "dataset", "batch", "agents", "on_non_finite", "reward"}

func TestResumeMayChangeClassifiesEveryField(t *testing.T) {
	typ := reflect.TypeFor[config.Config]()
	fields := map[string]bool{}
	for i := range typ.NumField() {
		if f := typ.Field(i); !f.IsExported() || f.Tag.Get("json") == "-" {
			continue // not in the training config's JSON
		}
		k := yamlKey(typ.Field(i))
		fields[k] = true
		if slices.Contains(resumeMayChange, k) == slices.Contains(trainingRelevant, k) {
			t.Errorf("config field %q must be in exactly one of resumeMayChange (confighash.go) and trainingRelevant (this test): may a resumed run change it?", k)
		}
	}
	for _, k := range slices.Concat(resumeMayChange, trainingRelevant) {
		if !fields[k] {
			t.Errorf("%q is not a config field", k)
		}
	}
}

func TestTrainingConfigHash(t *testing.T) {
	base := tinyConfig(t, t.TempDir(), "hacpo", 2)
	baseJSON, err := trainingConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		change func(c *config.Config)
		diff   string // "" = same hash
	}{
		{"steps", func(c *config.Config) { c.Steps = 9 }, ""},
		{"out", func(c *config.Config) { c.Out = "/elsewhere" }, ""},
		{"name", func(c *config.Config) { c.Name = "renamed" }, ""},
		{"eval", func(c *config.Config) { c.Eval.Every = 7; c.Eval.Sets = nil }, ""},
		{"checkpoint", func(c *config.Config) { c.Checkpoint.Keep = 5 }, ""},
		{"backend", func(c *config.Config) { c.Backend = "go" }, ""},
		{"engine", func(c *config.Config) { c.Engine = "graph" }, ""},
		{"tracking", func(c *config.Config) {
			c.Tracking = &config.Tracking{MLflow: &config.MLflow{URI: "http://127.0.0.1:5000", Experiment: "e"}}
		}, ""},
		{"lr", func(c *config.Config) { c.Agents[1].Optimizer.LR = 0.002 }, "agents[1].optimizer.lr: checkpoint 0.003, config 0.002"},
		{"seed", func(c *config.Config) { c.Seed = 8 }, "seed: checkpoint 7, config 8"},
		{"mini batch", func(c *config.Config) { c.Batch.MiniBatch = 4 }, "batch.mini_batch: checkpoint 8, config 4"},
		{"method", func(c *config.Config) { c.Method.Name = "naive" }, `method.name: checkpoint "hacpo", config "naive"`},
		{"task", func(c *config.Config) { c.Task = &config.Task{Name: "arith", Digits: 2} }, "task.digits: checkpoint 1, config 2"},
		{"top_k unset", func(c *config.Config) { c.Agents[1].Sampling.TopK = 0 }, "agents[1].sampling.top_k: checkpoint 20, config unset"},
		{"agent dropped", func(c *config.Config) { c.Agents = c.Agents[:2] }, "agents[2].name: checkpoint \"llama-bpe\", config unset"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := withAgents(base)
			c.change(cfg)
			got, err := trainingConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			same := configHash(got) == configHash(baseJSON)
			if c.diff == "" {
				if !same {
					t.Errorf("hash changed; diff %v", must(configDiff(baseJSON, got)))
				}
				return
			}
			if same {
				t.Fatal("hash unchanged")
			}
			if d := must(configDiff(baseJSON, got)); !slices.ContainsFunc(d, func(l string) bool { return strings.HasPrefix(l, c.diff) }) {
				t.Errorf("diff %q lacks %q", d, c.diff)
			}
		})
	}
	if !strings.HasPrefix(configHash(baseJSON), "sha256:") || len(configHash(baseJSON)) != len("sha256:")+64 {
		t.Errorf("hash %q", configHash(baseJSON))
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestResumeChecksTheConfig(t *testing.T) {
	cfg := tinyConfig(t, t.TempDir(), "hacpo", 2)
	cfg.Eval.Sets = nil
	trainWith(t, cfg, Options{})
	before := digest(t, cfg.Out)

	changed := withAgents(cfg)
	changed.Agents[1].Optimizer.LR = 0.002
	changed.Steps = 3
	_, err := New(context.Background(), changed, Options{Resume: true})
	for _, want := range []string{"not the one that wrote checkpoint", "step-00000002", "agents[1].optimizer.lr: checkpoint 0.003, config 0.002", "steps"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("resume with another lr: %v, want an error saying %q", err, want)
		}
	}
	sameTree(t, cfg.Out, before)

	// What may change does: more steps, another checkpoint and eval schedule.
	more := *cfg
	more.Steps, more.Checkpoint.Keep, more.Eval.Every = 3, 3, 1
	sum, _ := trainWith(t, &more, Options{Resume: true})
	if sum.Steps != 3 || sum.Resumed != 2 || !strings.Contains(sum.String(), "3 steps in") || !strings.Contains(sum.String(), "(resumed at step 2)") {
		t.Errorf("summary %+v:\n%s", sum, sum)
	}

	// A checkpoint from before config hashes resumes, with a warning.
	statePath := filepath.Join(checkpointDir(cfg.Out, 3), "state.json")
	var st map[string]any
	if err := json.Unmarshal(must(os.ReadFile(statePath)), &st); err != nil {
		t.Fatal(err)
	}
	if st["config_hash"] == nil || st["config"] == nil {
		t.Fatalf("state.json lacks the config and its hash: %v", st)
	}
	delete(st, "config_hash")
	delete(st, "config")
	if err := os.WriteFile(statePath, must(json.Marshal(st)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(checkpointDir(cfg.Out, 3), checksum.FileName)); err != nil { // nor checksums
		t.Fatal(err)
	}
	more.Steps = 4
	_, rec := trainWith(t, &more, Options{Resume: true})
	if !strings.Contains(rec.text(), "predates config hashes") {
		t.Errorf("no warning about the checkpoint without a config hash:\n%s", rec.text())
	}
}

// damage breaks one checkpoint in a way a crash or a full disk could.
var damages = []struct {
	name   string
	damage func(t *testing.T, ckpt string)
	reason string // in the message
}{
	{"truncated weights", func(t *testing.T, ckpt string) {
		p := filepath.Join(ckpt, "agents", "llama-char", model.WeightsFile)
		if err := os.Truncate(p, must(os.Stat(p)).Size()/2); err != nil {
			t.Fatal(err)
		}
	}, "agents/llama-char/model.safetensors: "},
	{"corrupt state", func(t *testing.T, ckpt string) {
		if err := os.WriteFile(filepath.Join(ckpt, "state.json"), []byte(`{"step": 3, "agents": [`), 0o644); err != nil {
			t.Fatal(err)
		}
	}, "state.json"},
	{"missing optimizer state", func(t *testing.T, ckpt string) {
		if err := os.Remove(filepath.Join(ckpt, "agents", "gpt-char", model.OptimizerFile)); err != nil {
			t.Fatal(err)
		}
	}, model.OptimizerFile},
	{"missing agent", func(t *testing.T, ckpt string) {
		if err := os.RemoveAll(filepath.Join(ckpt, "agents", "llama-bpe")); err != nil {
			t.Fatal(err)
		}
	}, "agents/llama-bpe/checksums.json: missing"},
}

// TestDamagedCheckpointFallsBack: when the latest checkpoint is damaged, a
// resume says so and continues from the previous one, and ends with the same
// metrics as the run that was never damaged.
func TestDamagedCheckpointFallsBack(t *testing.T) {
	dir := t.TempDir()
	cfg := tinyConfig(t, dir, "hacpo", 3)
	trainWith(t, cfg, Options{})
	want := must(metrics.ReadFile(filepath.Join(cfg.Out, metrics.FileName)))
	for _, d := range damages {
		t.Run(d.name, func(t *testing.T) {
			c := *cfg
			c.Out = filepath.Join(t.TempDir(), "out")
			copyTree(t, cfg.Out, c.Out)
			latest := checkpointDir(c.Out, 3)
			d.damage(t, latest)
			_, rec := trainWith(t, &c, Options{Resume: true})
			for _, w := range []string{"checkpoint " + latest + " is damaged", d.reason, "falling back to " + checkpointDir(c.Out, 2), "resumed from " + checkpointDir(c.Out, 2) + " (step 2)"} {
				if !strings.Contains(rec.text(), w) {
					t.Errorf("log lacks %q:\n%s", w, rec.text())
				}
			}
			if _, err := os.Stat(filepath.Join(c.Out, "checkpoints", "damaged-step-00000003")); err != nil {
				t.Errorf("the damaged checkpoint was not set aside: %v", err)
			}
			cks, _ := listCheckpoints(c.Out)
			if len(cks) != 2 || filepath.Base(cks[1]) != "step-00000003" {
				t.Errorf("checkpoints %v, want steps 2 and 3", cks)
			}
			got := must(metrics.ReadFile(filepath.Join(c.Out, metrics.FileName)))
			if !reflect.DeepEqual(deterministic(got), deterministic(want)) {
				t.Errorf("metrics after the fallback differ from the undamaged run's")
			}
		})
	}
	t.Run("none intact", func(t *testing.T) {
		c := *cfg
		c.Out = filepath.Join(t.TempDir(), "out")
		copyTree(t, cfg.Out, c.Out)
		damages[0].damage(t, checkpointDir(c.Out, 3))
		damages[1].damage(t, checkpointDir(c.Out, 2))
		before := digest(t, c.Out)
		_, err := New(context.Background(), &c, Options{Resume: true, Observer: &recorder{}})
		for _, w := range []string{"no intact checkpoint", "step-00000003: " + filepath.Join(checkpointDir(c.Out, 3), "agents", "llama-char", model.WeightsFile), "step-00000002: " + filepath.Join(checkpointDir(c.Out, 2), "state.json")} {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("error %v lacks %q", err, w)
			}
		}
		sameTree(t, c.Out, before)
	})
}

// TestFailedResumeKeepsFiles: a resume that fails during setup leaves the
// metrics and the checkpoints as they were, though it would have truncated
// the metrics to the step it fell back to.
func TestFailedResumeKeepsFiles(t *testing.T) {
	cfg := tinyConfig(t, t.TempDir(), "hacpo", 3)
	trainWith(t, cfg, Options{})
	damages[0].damage(t, checkpointDir(cfg.Out, 3))
	before := digest(t, cfg.Out)
	bad := *cfg
	bad.Eval.Sets = slices.Clone(cfg.Eval.Sets)
	bad.Eval.Sets[0].MaxNewTokens = 1000 // more than the context: fails after the checkpoint is read
	rec := &recorder{}
	if _, err := New(context.Background(), &bad, Options{Resume: true, Observer: rec}); err == nil || !strings.Contains(err.Error(), "exceeds the model's context") {
		t.Fatalf("resume with an impossible evaluation: %v", err)
	}
	if !strings.Contains(rec.text(), "falling back") {
		t.Fatalf("the resume did not get as far as the fallback:\n%s", rec.text())
	}
	sameTree(t, cfg.Out, before)
}

func TestSummaryAfterInterrupt(t *testing.T) {
	for _, c := range []struct {
		name      string
		every     int
		stopAfter int
		want      []string
	}{
		{"evaluated since the start", 2, 3, []string{"step 0", "step 2", "change"}},
		{"not evaluated since the start", 0, 1, []string{"one evaluation, at step 0 (none in the 1 steps since)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := tinyConfig(t, t.TempDir(), "hacpo", 50)
			cfg.Eval.Every = c.every
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			rec := &recorder{onStep: func(step int) {
				if step == c.stopAfter {
					cancel()
				}
			}}
			run, err := New(ctx, cfg, Options{Observer: rec})
			if err != nil {
				t.Fatal(err)
			}
			sum, err := run.Train(ctx)
			if !errors.Is(err, ErrInterrupted) {
				t.Fatalf("Train: %v, want ErrInterrupted", err)
			}
			s := sum.String()
			if sum.Steps != c.stopAfter || !strings.HasPrefix(s, "3 steps in") && c.stopAfter == 3 {
				t.Errorf("summary of %d steps:\n%s", sum.Steps, s)
			}
			for _, w := range c.want {
				if !strings.Contains(s, w) {
					t.Errorf("summary lacks %q:\n%s", w, s)
				}
			}
			if c.every == 0 && strings.Contains(s, "+0.000") {
				t.Errorf("summary compares the start with itself:\n%s", s)
			}
			// The latest values are those of the latest evaluation.
			recs := must(metrics.ReadFile(filepath.Join(cfg.Out, metrics.FileName)))
			for _, r := range recs {
				if v, ok := r.Values["eval/test/greedy_acc"]; ok && r.Step == sum.LastStep && sum.Last[r.Agent]["eval/test/greedy_acc"] != v {
					t.Errorf("%s: summary shows %v, the evaluation at step %d %v", r.Agent, sum.Last[r.Agent]["eval/test/greedy_acc"], r.Step, v)
				}
			}
			// Resumed, the summary remembers the evaluation steps.
			more := *cfg
			more.Steps = c.stopAfter + 1
			sum2, _ := trainWith(t, &more, Options{Resume: true})
			if sum2.FirstStep != 0 || sum2.LastStep != c.stopAfter+1 {
				t.Errorf("after resuming: evaluations at steps %d and %d, want 0 and %d", sum2.FirstStep, sum2.LastStep, c.stopAfter+1)
			}
		})
	}
}

func TestResumeFinishedRun(t *testing.T) {
	cfg := tinyConfig(t, t.TempDir(), "hacpo", 2)
	trainWith(t, cfg, Options{})
	before := digest(t, cfg.Out)
	for _, steps := range []int{2, 1} {
		c := *cfg
		c.Steps = steps
		sum, _ := trainWith(t, &c, Options{Resume: true})
		s := sum.String()
		if !sum.AlreadyComplete || !strings.Contains(s, "run already complete at step 2") || strings.Contains(s, "steps in") ||
			!strings.Contains(s, "step 0") || !strings.Contains(s, "test/greedy_acc") {
			t.Errorf("resume of a finished run with steps %d:\n%s", steps, s)
		}
		sameTree(t, cfg.Out, before)
	}
	// On read-only storage a finished run prints its table (it takes no
	// lock: nothing can write there); an unfinished one says it cannot go on.
	ro := *cfg
	ro.Out = mounttest.ReadOnly(t, cfg.Out)
	sum, err := trainWithErr(t, &ro, Options{Resume: true})
	if err != nil || !sum.AlreadyComplete || !strings.Contains(sum.String(), "test/greedy_acc") {
		t.Errorf("resume of a finished run on read-only storage: %v\n%v", err, sum)
	}
	ro.Steps = 3
	if _, err := trainWithErr(t, &ro, Options{Resume: true}); err == nil || !strings.Contains(err.Error(), "read-only file system") ||
		!strings.Contains(err.Error(), "continues only on writable storage") {
		t.Errorf("resume of an unfinished run on read-only storage: %v", err)
	}
	sameTree(t, cfg.Out, before)
	// A run killed between its last checkpoint and its final agents gets them.
	if err := os.RemoveAll(filepath.Join(cfg.Out, "final", "llama-bpe")); err != nil {
		t.Fatal(err)
	}
	trainWith(t, cfg, Options{Resume: true})
	sameTree(t, cfg.Out, before) // the same agent again, from the last checkpoint
}

// A run in one process and a run of agent processes do not resume as each
// other: the one would start afresh beside the other's checkpoints and
// replace its metrics.
func TestRunKindsDoNotMix(t *testing.T) {
	dir := t.TempDir()
	single := filepath.Join(dir, "single")
	if err := os.MkdirAll(filepath.Join(single, "checkpoints", "step-00000001"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := ClaimOut(single, Options{Resume: true}); err == nil || !strings.Contains(err.Error(), "resume it without --processes") {
		t.Errorf("--processes --resume of a one-process run: %v", err)
	}
	procs := filepath.Join(dir, "procs")
	for _, d := range []string{"agents/a", "nats"} {
		if err := os.MkdirAll(filepath.Join(procs, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := tinyConfig(t, dir, "hacpo", 1)
	cfg.Out = procs
	if _, err := New(context.Background(), cfg, Options{Resume: true}); err == nil || !strings.Contains(err.Error(), "resume it with --processes --resume") {
		t.Errorf("one-process --resume of a run of agent processes: %v", err)
	}
	release, err := ClaimOut(procs, Options{Resume: true})
	if err != nil {
		t.Fatalf("--processes --resume of its own run: %v", err)
	}
	release()
}
