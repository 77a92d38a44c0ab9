package train

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hacrl/hacrl/internal/runlock"
	"github.com/hacrl/hacrl/metrics"
	"go.yaml.in/yaml/v3"
)

// TestOneRunPerDirectory runs real training processes on one directory: while
// a run goes on, a second one (new, --resume or --overwrite) is refused with
// the first one's pid, host and command line, and the first goes on
// unaffected; a run killed with SIGKILL leaves a lock the next run takes
// over, saying so; a run that exits releases it.
func TestOneRunPerDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs several training processes")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	cfg := tinyConfig(t, dir, "gspo", 200)
	cfg.Eval.Sets = nil
	cfg.Checkpoint.Every = 2
	data, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "run.yaml")
	if err := os.WriteFile(cfgPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	start := func(args ...string) (*exec.Cmd, *syncBuffer) {
		cmd := exec.Command(bin, append([]string{"train", cfgPath}, args...)...)
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill() })
		return cmd, out
	}
	waitFor := func(out *syncBuffer, s string) {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Minute); !strings.Contains(out.String(), s); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in:\n%s", s, out.String())
			}
		}
	}
	exitStatus := func(cmd *exec.Cmd) int {
		cmd.Wait()
		return cmd.ProcessState.Sys().(syscall.WaitStatus).ExitStatus()
	}
	host, _ := os.Hostname()

	first, firstOut := start()
	waitFor(firstOut, "step 2/200 ")
	for _, args := range [][]string{nil, {"--resume"}, {"--overwrite"}} {
		second := exec.Command(bin, append([]string{"train", cfgPath}, args...)...)
		out, err := second.CombinedOutput()
		if err == nil {
			t.Fatalf("a second run %v on a directory in use was accepted:\n%s", args, out)
		}
		for _, want := range []string{cfg.Out + " is in use by another run", fmt.Sprintf("pid %d", first.Process.Pid), "on host " + host,
			"started ", fmt.Sprintf("%s train %s", bin, cfgPath)} {
			if !bytes.Contains(out, []byte(want)) {
				t.Errorf("second run %v: output lacks %q:\n%s", args, want, out)
			}
		}
	}
	first.Process.Signal(os.Interrupt)
	if st := exitStatus(first); st != 130 {
		t.Fatalf("the first run exited with %d, want 130 (interrupted):\n%s", st, firstOut.String())
	}
	done := checkOneWriter(t, cfg.Out, []string{"gpt-char", "llama-char", "llama-bpe"})

	// SIGKILL: the lock file still names the dead process; the next run
	// takes the lock over and says whose it was.
	killed, killedOut := start("--resume")
	waitFor(killedOut, fmt.Sprintf("step %d/200 ", done+1))
	killed.Process.Kill()
	killed.Wait()
	if h, err := os.ReadFile(filepath.Join(cfg.Out, runlock.FileName)); err != nil || !bytes.Contains(h, []byte(fmt.Sprintf(`"pid":%d`, killed.Process.Pid))) {
		t.Fatalf("lock file after SIGKILL: %q (%v)", h, err)
	}
	next := exec.Command(bin, "train", cfgPath, "--resume", "--steps", fmt.Sprint(done+3))
	out, err := next.CombinedOutput()
	if err != nil {
		t.Fatalf("resume after SIGKILL: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("ended without releasing its lock")) || !bytes.Contains(out, []byte(fmt.Sprintf("pid %d", killed.Process.Pid))) {
		t.Errorf("no word of the killed run's stale lock:\n%s", out)
	}
	if got := checkOneWriter(t, cfg.Out, []string{"gpt-char", "llama-char", "llama-bpe"}); got != done+3 {
		t.Errorf("metrics end at step %d, want %d", got, done+3)
	}
	// A run that exits releases the lock: the next one finds no stale lock.
	if h, _ := os.ReadFile(filepath.Join(cfg.Out, runlock.FileName)); len(h) != 0 {
		t.Errorf("lock file after a clean exit: %q", h)
	}
	again := exec.Command(bin, "train", cfgPath, "--resume", "--steps", fmt.Sprint(done+3))
	out, err = again.CombinedOutput()
	if err != nil || bytes.Contains(out, []byte("without releasing")) || !bytes.Contains(out, []byte(fmt.Sprintf("run already complete at step %d", done+3))) {
		t.Errorf("resume of the finished run: %v\n%s", err, out)
	}
}

// checkOneWriter checks that OUT's metrics are one run's: every agent has one
// record per step from 1 to the last, and the latest checkpoint is the last
// step. It returns the last step.
func checkOneWriter(t *testing.T, out string, agents []string) int {
	t.Helper()
	recs, err := metrics.ReadFile(filepath.Join(out, metrics.FileName))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	last := 0
	for _, r := range recs {
		key := fmt.Sprintf("%s@%d", r.Agent, r.Step)
		seen[key]++
		if seen[key] > 1 {
			t.Errorf("two records of %s at step %d", r.Agent, r.Step)
		}
		last = max(last, r.Step)
	}
	for step := 1; step <= last; step++ {
		for _, a := range append([]string{""}, agents...) {
			if seen[fmt.Sprintf("%s@%d", a, step)] != 1 {
				t.Errorf("no record of %q at step %d", a, step)
			}
		}
	}
	cks, _ := listCheckpoints(out)
	if len(cks) == 0 || filepath.Base(cks[len(cks)-1]) != filepath.Base(checkpointDir(out, last)) {
		t.Errorf("checkpoints %v, metrics end at step %d", cks, last)
	}
	return last
}
