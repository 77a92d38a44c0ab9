package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hacrl/hacrl/bus"
	"github.com/hacrl/hacrl/metrics"
	"github.com/hacrl/hacrl/train"
)

// The interrupt tests: however and whenever a run of agent processes is
// interrupted, every agent stops after the same step with a checkpoint
// there, the supervisor says what each agent did, and --resume ends with
// the uninterrupted run's metrics (processes_test.go's reference).

var procAgents = []string{"gpt-char", "llama-bpe"}

// outcomeLine is the supervisor's report of one agent (sayOutcomes).
var outcomeLine = regexp.MustCompile(`(?m)^\[([a-z-]+)\] (finished|interrupted|failed|killed)[^;\n]*; (?:checkpoint at step (\d+)|no checkpoint)$`)

// askedAt is an agent saying at which step it asked the others to stop.
var askedAt = regexp.MustCompile(`asked every agent of the run to stop after step (\d+)`)

// latestCheckpoints are the steps of each agent's newest checkpoint (-1:
// none).
func latestCheckpoints(out string) map[string]int {
	steps := map[string]int{}
	for _, name := range procAgents {
		steps[name] = -1
		if s, ok := train.LatestCheckpoint(filepath.Join(out, "agents", name)); ok {
			steps[name] = s
		}
	}
	return steps
}

// TestProcessesInterruptAnywhere interrupts hacrl train --processes at
// moments drawn across a whole run (setup, any step, the last one, the
// merge), by SIGINT or SIGTERM to the command or SIGINT to its process group
// (a terminal's Ctrl-C), and resumes it each time with --resume, until the
// run ends. Each interrupted session exits with status 130, every agent's
// newest checkpoint is at the same step, and the supervisor reports each
// agent as interrupted with that checkpoint; the merged metrics so far are
// the reference's first records, and the run that ends has all of them.
func TestProcessesInterruptAnywhere(t *testing.T) {
	want := reference(t)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(29, 1))

	// How long a whole run takes here: the moments are drawn across it.
	t0 := time.Now()
	if res := run(t, hacrlBin(t), "", "", nil, "train", procConfig(t, filepath.Join(dir, "whole"), "0.0001"), "--processes"); res.code != 0 {
		t.Fatalf("uninterrupted run: status %d\n%s", res.code, res.stderr)
	}
	span := time.Since(t0)

	signals := []struct {
		name string
		send func(pid int) error
	}{
		{"SIGINT", func(pid int) error { return syscall.Kill(pid, syscall.SIGINT) }},
		{"SIGTERM", func(pid int) error { return syscall.Kill(pid, syscall.SIGTERM) }},
		{"SIGINT to the process group", func(pid int) error { return syscall.Kill(-pid, syscall.SIGINT) }},
	}
	const interrupts = 12
	stopped := map[int]int{} // sessions stopped, by the agents' checkpoint step
	for n, chain := 0, 0; n < interrupts; chain++ {
		out := filepath.Join(dir, fmt.Sprintf("run%d", chain))
		cfg := procConfig(t, out, "0.0001")
		for resume := false; ; resume = true {
			args := []string{"train", cfg, "--processes"}
			if resume {
				args = append(args, "--resume")
			}
			sig := signals[n%len(signals)]
			at := time.Duration(rng.Int64N(int64(span)))
			what := fmt.Sprintf("run %d, %s after %v", chain, sig.name, at.Round(time.Millisecond))
			l := startGroup(t, args...)
			select {
			case <-time.After(at):
				if err := sig.send(l.cmd.Process.Pid); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				n++
			case err := <-l.done:
				l.done <- err
			}
			l.wait(t, 2*time.Minute)
			text := l.String()
			ws := l.cmd.ProcessState.Sys().(syscall.WaitStatus)
			steps := latestCheckpoints(out)
			switch {
			case ws.Signaled() && !strings.Contains(text, "started (pid"):
				// The signal came before the command could catch it: nothing started.
				t.Logf("%s: the command died of it before starting anything", what)
				continue
			case ws.ExitStatus() == 0:
				sameMetrics(t, what+": the finished run", stableMetrics(t, filepath.Join(out, "metrics.jsonl")), want)
			case ws.ExitStatus() != 130:
				t.Fatalf("%s: %v, want status 130\n%s", what, l.cmd.ProcessState, text)
			}
			if ws.ExitStatus() == 0 {
				// Only an interrupt after the agents shared step 3 lets the run end.
				for _, m := range askedAt.FindAllStringSubmatch(text, -1) {
					if m[1] != "4" {
						t.Fatalf("%s: the agents asked to stop after step %s, and the run went on to its end\n%s", what, m[1], text)
					}
				}
				t.Logf("%s: the run ended", what)
				break
			}
			if steps[procAgents[0]] != steps[procAgents[1]] {
				t.Fatalf("%s: the agents' newest checkpoints are at steps %v, want one step\n%s", what, steps, text)
			}
			said := map[string]bool{}
			for _, m := range outcomeLine.FindAllStringSubmatch(text, -1) {
				said[m[1]] = true
				ckpt := fmt.Sprint(steps[m[1]])
				if steps[m[1]] < 0 {
					ckpt = ""
				}
				if m[2] != "interrupted" || m[3] != ckpt {
					t.Fatalf("%s: the report says %q; the agent's newest checkpoint is at step %d\n%s", what, m[0], steps[m[1]], text)
				}
			}
			if len(said) != len(procAgents) && !strings.Contains(text, "interrupted before any agent started") {
				t.Fatalf("%s: the report names %d agents, want each one's outcome\n%s", what, len(said), text)
			}
			if recs, err := metrics.ReadFile(filepath.Join(out, "metrics.jsonl")); err == nil {
				recs = metrics.WithoutTiming(recs)
				if len(recs) > len(want) {
					t.Fatalf("%s: %d metrics records merged, the whole run has %d", what, len(recs), len(want))
				}
				sameMetrics(t, what+": the metrics so far", recs, want[:len(recs)])
			}
			stopped[steps[procAgents[0]]]++
			t.Logf("%s: every agent stopped with its checkpoint at step %d", what, steps[procAgents[0]])
		}
	}
	t.Logf("%d interrupts; sessions stopped, by checkpoint step (-1: none): %v", interrupts, stopped)
}

// startGroup starts hacrl in a process group of its own, as a shell starts
// a command in the foreground: a signal to the group reaches only it.
func startGroup(t *testing.T, args ...string) *liveRun {
	t.Helper()
	l := &liveRun{done: make(chan error, 1)}
	l.cmd = exec.Command(hacrlBin(t), args...)
	l.cmd.Stdout, l.cmd.Stderr = l, l
	l.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := l.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { l.done <- l.cmd.Wait() }()
	t.Cleanup(func() {
		syscall.Kill(-l.cmd.Process.Pid, syscall.SIGKILL)
		<-l.done
	})
	return l
}

// TestAgentsStopTogether: two hacrl agent processes on a bus, one a step
// ahead of the other — it has published its rollouts of step 3 while the
// other still updates step 2 — and only the one behind is interrupted.
// Both stop after step 3, the step the interrupted one asks at, each with a
// checkpoint there (no agent waits for rollouts another never publishes).
// Then the one behind loses that checkpoint and both resume: it replays
// step 3, whose stop request belongs to the earlier session and does not
// stop it again, and the run ends with the uninterrupted run's metrics.
func TestAgentsStopTogether(t *testing.T) {
	want := reference(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "together")
	cfg := procConfig(t, out, "0.0001")
	srv, err := bus.StartServer(context.Background(), bus.ServerOptions{Dir: filepath.Join(dir, "nats")})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	start := func(name string, more ...string) *liveRun {
		return startLive(t, nil, append([]string{"agent", cfg, "--agent", name, "--bus", srv.URL(), "--wait", "15s", "--verbose"}, more...)...)
	}
	ahead, behind := start("gpt-char"), start("llama-bpe")

	// Hold the one behind while it updates step 2, until the other has
	// published step 3.
	behind.waitFor(t, time.Minute, "llama-bpe at step 2", func(out string) bool { return strings.Contains(out, "step 2/4 llama-bpe: update") })
	if err := behind.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if out := behind.String(); strings.Contains(out, "step 3/4 llama-bpe: score") {
		// It publishes its step 3 once scored: no longer behind.
		t.Fatalf("llama-bpe went on to score step 3 before it was held\n%s", out)
	}
	ahead.waitFor(t, time.Minute, "gpt-char sharing step 3", func(out string) bool { return strings.Contains(out, "step 3/4 gpt-char: score") })
	time.Sleep(500 * time.Millisecond) // it publishes, then waits for llama-bpe's step 3
	behind.cmd.Process.Signal(os.Interrupt)
	behind.cmd.Process.Signal(syscall.SIGCONT)

	for _, l := range []*liveRun{ahead, behind} {
		l.wait(t, time.Minute)
		if code := l.cmd.ProcessState.ExitCode(); code != 130 || !strings.Contains(l.String(), "stopped after step 3, as llama-bpe asked") {
			t.Fatalf("%v: status %d, want 130 after stopping at step 3 as llama-bpe asked\n%s", l.cmd.Args[3:6], code, l.String())
		}
	}
	if steps := latestCheckpoints(out); steps["gpt-char"] != 3 || steps["llama-bpe"] != 3 {
		t.Fatalf("newest checkpoints at steps %v, want both at step 3", steps)
	}

	// llama-bpe resumes from step 2 and replays step 3, past its stop request.
	if err := os.RemoveAll(filepath.Join(out, "agents", "llama-bpe", "checkpoints", "step-00000003")); err != nil {
		t.Fatal(err)
	}
	ahead, behind = start("gpt-char", "--resume"), start("llama-bpe", "--resume")
	for _, l := range []*liveRun{ahead, behind} {
		if err := l.wait(t, time.Minute); err != nil {
			t.Fatalf("%v resumed: %v\n%s", l.cmd.Args[3:6], err, l.String())
		}
	}
	for _, name := range procAgents {
		sameMetrics(t, name+" stopped and resumed", metrics.OfAgent(stableMetrics(t, filepath.Join(out, "agents", name, "metrics.jsonl")), name), metrics.OfAgent(want, name))
	}
}
