package train

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hacrl/hacrl/internal/tboracle"
	"github.com/hacrl/hacrl/metrics"
	"github.com/hacrl/hacrl/rollout"
	"go.yaml.in/yaml/v3"
)

// buildBinary builds cmd/hacrl once for the kill-and-resume test.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "hacrl")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/hacrl")
	cmd.Env = append(os.Environ(), "GOEXPERIMENT=simd")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// deterministic drops the timing keys (and the record time), which measure
// the machine rather than the run.
func deterministic(recs []metrics.Record) []metrics.Record { return metrics.WithoutTiming(recs) }

// TestKillAndResume: a run killed with SIGKILL at arbitrary moments, and once
// in the middle of writing a checkpoint, then resumed until done, ends with
// the same metrics as an uninterrupted run, bit for bit.
func TestKillAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs several training processes")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	cfg := tinyConfig(t, dir, "hacpo", 4)
	cfg.Eval.Every = 2
	cfg.Rollouts.Every = 1
	write := func(out string) string {
		c := *cfg
		c.Out = out
		data, err := yaml.Marshal(&c)
		if err != nil {
			t.Fatal(err)
		}
		p := out + ".yaml"
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// run runs hacrl train --verbose; with kill set it SIGKILLs the process
	// once kill says so, given the output so far (the progress lines: one per
	// agent and phase, and one per finished step).
	run := func(cfgPath string, env []string, kill func(output string) bool, args ...string) (killed bool) {
		cmd := exec.Command(bin, append([]string{"train", cfgPath, "--verbose"}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		out := &syncBuffer{}
		cmd.Stderr, cmd.Stdout = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case err := <-done:
				if err != nil {
					if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
						return true
					}
					t.Fatalf("hacrl train: %v\n%s", err, out.String())
				}
				return false
			case <-tick.C:
				if kill != nil && kill(out.String()) {
					cmd.Process.Kill()
					<-done
					return true
				}
			}
		}
	}

	ref := filepath.Join(dir, "ref")
	run(write(ref), nil, nil)
	want, err := metrics.ReadFile(filepath.Join(ref, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(dir, "killed")
	cfgPath := write(out)
	// First a crash in the middle of writing step 2's checkpoint.
	if !run(cfgPath, []string{CrashEnv + "=2"}, nil) {
		t.Fatal("the process did not die in the checkpoint")
	}
	if cks, _ := listCheckpoints(out); len(cks) != 1 || filepath.Base(cks[0]) != "step-00000001" {
		t.Fatalf("after a crash while writing step 2, checkpoints are %v, want only step 1", cks)
	}
	// Then kills at random moments, resuming each time, until a run finishes:
	// at a random time during start-up (loading, the lock, setting aside a
	// damaged checkpoint), or a random moment after a random progress line
	// (in sampling, scoring, an update, an evaluation, a checkpoint).
	rng := rand.New(rand.NewPCG(1, 2))
	kills := 0
	const killRuns = 8
	for attempt := 0; ; attempt++ {
		if attempt > 40 {
			t.Fatal("the run never finished")
		}
		var kill func(string) bool
		if attempt < killRuns {
			start := time.Now()
			jitter := time.Duration(rng.IntN(20)) * time.Millisecond
			if attempt%3 == 0 {
				early := time.Duration(rng.IntN(150)) * time.Millisecond
				kill = func(string) bool { return time.Since(start) > early }
			} else {
				lines := 1 + rng.IntN(12)
				var seen time.Time
				kill = func(out string) bool {
					if seen.IsZero() && strings.Count(out, " step ") >= lines {
						seen = time.Now()
					}
					return !seen.IsZero() && time.Since(seen) >= jitter
				}
			}
		}
		if run(cfgPath, nil, kill, "--resume") {
			kills++
			continue
		}
		if attempt < killRuns {
			continue // finished before its kill: resume again (a finished run says so)
		}
		break
	}
	// The kills must have landed: most runs die before they finish.
	if kills < killRuns/2 {
		t.Fatalf("only %d of %d runs were killed before finishing: the kill moments are too late to test anything", kills, killRuns)
	}
	got, err := metrics.ReadFile(filepath.Join(out, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d kills at random moments after the crash in a checkpoint", kills)
	if !reflect.DeepEqual(deterministic(got), deterministic(want)) {
		g, w := deterministic(got), deterministic(want)
		for i := range min(len(g), len(w)) {
			if !reflect.DeepEqual(g[i], w[i]) {
				t.Fatalf("record %d differs:\n got %v\nwant %v", i, g[i], w[i])
			}
		}
		t.Fatalf("%d records, want %d", len(g), len(w))
	}
	// The rollout logs too: the same files, with the same records.
	for s := 1; s <= cfg.Steps; s++ {
		if g, w := logText(t, rollout.LogPath(out, s)), logText(t, rollout.LogPath(ref, s)); g != w {
			t.Errorf("step %d's rollout log differs from the uninterrupted run's", s)
		}
	}
	if ents, err := os.ReadDir(filepath.Join(out, rollout.LogDir)); err != nil || len(ents) != cfg.Steps {
		t.Errorf("%s holds %d entries (%v), want the %d logs", rollout.LogDir, len(ents), err, cfg.Steps)
	}
	// What TensorBoard shows of the killed and resumed run is its metrics.
	tboracle.Check(t, out)
}

// TestInterruptSavesAndResumes: SIGINT finishes the current step, saves a
// checkpoint of it and exits with status 130; --resume continues from there.
func TestInterruptSavesAndResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	cfg := tinyConfig(t, dir, "gspo", 200)
	cfg.Eval.Sets = nil
	cfg.Checkpoint.Every = 0 // only the interrupt and the end save
	data, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "run.yaml")
	if err := os.WriteFile(cfgPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "train", cfgPath)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait for the first finished step, then interrupt.
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(out.String(), "step 1/200 ") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	cmd.Process.Signal(os.Interrupt)
	err = cmd.Wait()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if err == nil || ws.ExitStatus() != 130 {
		t.Fatalf("exit %v (status %d), want 130\n%s", err, ws.ExitStatus(), out.String())
	}
	cks, _ := listCheckpoints(cfg.Out)
	if len(cks) != 1 {
		t.Fatalf("checkpoints %v after an interrupt, want one", cks)
	}
	var done int
	fmt.Sscanf(filepath.Base(cks[0]), "step-%d", &done)
	recs, err := metrics.ReadFile(filepath.Join(cfg.Out, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if last := recs[len(recs)-1].Step; done < 1 || last != done {
		t.Fatalf("checkpoint at step %d, metrics end at step %d", done, last)
	}
	if !strings.Contains(out.String(), "checkpoint saved") {
		t.Errorf("no message about the saved checkpoint:\n%s", out.String())
	}
	// Resume for two more steps.
	res := exec.Command(bin, "train", cfgPath, "--resume", "--steps", fmt.Sprint(done+2))
	if o, err := res.CombinedOutput(); err != nil {
		t.Fatalf("resume: %v\n%s", err, o)
	} else if !strings.Contains(string(o), fmt.Sprintf("resumed from %s (step %d)", cks[0], done)) {
		t.Errorf("resume output:\n%s", o)
	}
	recs, _ = metrics.ReadFile(filepath.Join(cfg.Out, "metrics.jsonl"))
	if last := recs[len(recs)-1].Step; last != done+2 {
		t.Errorf("after resuming, metrics end at step %d, want %d", last, done+2)
	}
	tboracle.Check(t, cfg.Out)
}

// syncBuffer is a bytes.Buffer safe to read while a child process writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
