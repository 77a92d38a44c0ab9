package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hacrl/hacrl/bus"
	"github.com/hacrl/hacrl/metrics"
)

// The agents-as-processes tests run the real binary on the main example's
// two agents (shortened: 4 steps of 8 prompts × 4 responses, evaluations at
// steps 0, 2 and 4), and compare every agent's metrics with the
// single-process run's, timing keys aside.

// procConfig writes the shortened main example with output directory out.
func procConfig(t *testing.T, out string, lr string) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf(`name: procs
seed: 3
out: %s
steps: 4
method: {name: hacpo}
task: {name: arith, digits: 2, operators: "+-"}
batch: {prompts_per_step: 8, responses_per_prompt: 4, mini_batch: 32, micro_batch: 32}
agents:
  - name: gpt-char
    checkpoint: %s
    optimizer: {lr: %s}
    sampling: {max_new_tokens: 40}
  - name: llama-bpe
    checkpoint: %s
    template: {kind: chat}
    optimizer: {lr: 0.0001}
    sampling: {max_new_tokens: 32}
eval:
  every: 2
  sets: [{name: test, split: test, problems: 20, samples: 2}]
checkpoint: {every: 1, keep: 2}
rollouts: {every: 2}
`, out, filepath.Join(root, "examples", "agents", "gpt-char"), lr, filepath.Join(root, "examples", "agents", "llama-bpe"))
	path := out + ".yaml"
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// stableMetrics reads a run's metrics without the timing keys (and record
// times), which measure the machine rather than the run.
func stableMetrics(t *testing.T, path string) []metrics.Record {
	t.Helper()
	recs, err := metrics.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return metrics.WithoutTiming(recs)
}

func sameMetrics(t *testing.T, what string, got, want []metrics.Record) {
	t.Helper()
	if reflect.DeepEqual(got, want) {
		return
	}
	for i := range min(len(got), len(want)) {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("%s: record %d differs:\n got %v\nwant %v", what, i, got[i], want[i])
		}
	}
	t.Fatalf("%s: %d records, want %d", what, len(got), len(want))
}

var (
	referenceMu     sync.Mutex
	referenceStderr string // the run's standard error
)

// reference trains the shortened example in one process, once per test
// binary, and returns its metrics (and keeps its standard error in
// referenceStderr).
func reference(t *testing.T) []metrics.Record {
	t.Helper()
	bin := hacrlBin(t)
	referenceMu.Lock()
	defer referenceMu.Unlock()
	out := filepath.Join(buildDir, "procs-ref")
	if _, err := os.Stat(filepath.Join(out, "final")); err != nil {
		os.RemoveAll(out)
		res := run(t, bin, "", "", nil, "train", procConfig(t, out, "0.0001"))
		if res.code != 0 {
			t.Fatalf("single-process run: status %d\n%s", res.code, res.stderr)
		}
		referenceStderr = res.stderr
	}
	return stableMetrics(t, filepath.Join(out, "metrics.jsonl"))
}

// TestProcessesMatchOneProcess: hacrl train --processes gives every agent the
// single-process run's metrics, bit for bit, merged in the same order.
func TestProcessesMatchOneProcess(t *testing.T) {
	want := reference(t)
	out := filepath.Join(t.TempDir(), "procs")
	res := run(t, hacrlBin(t), "", "", nil, "train", procConfig(t, out, "0.0001"), "--processes")
	if res.code != 0 {
		t.Fatalf("status %d\n%s", res.code, res.stderr)
	}
	merged := stableMetrics(t, filepath.Join(out, "metrics.jsonl"))
	sameMetrics(t, "--processes", merged, want)
	for _, name := range []string{"gpt-char", "llama-bpe"} {
		checkProgress(t, "--processes "+name, agentLines(res.stderr, name), 4, []string{name}, merged, false)
		if !strings.Contains(res.stdout, "["+name+"] "+name) {
			t.Errorf("standard output lacks %s's final table:\n%s", name, res.stdout)
		}
		if _, err := os.Stat(filepath.Join(out, "agents", name, "final", name, "agent.json")); err != nil {
			t.Errorf("agent %s: no final checkpoint: %v", name, err)
		}
	}
	// A second run in the same OUT is refused, as for one process.
	res = run(t, hacrlBin(t), "", "", nil, "train", procConfig(t, out, "0.0001"), "--processes")
	if res.code == 0 || !strings.Contains(res.stderr, "already holds a run") {
		t.Fatalf("a new run in a finished run's OUT: status %d\n%s", res.code, res.stderr)
	}
}

// liveRun is a hacrl process whose output the test reads as it comes.
type liveRun struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan error
}

func (l *liveRun) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.out.Write(p)
}

func (l *liveRun) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.out.String()
}

func startLive(t *testing.T, env []string, args ...string) *liveRun {
	t.Helper()
	return startCmd(t, exec.Command(hacrlBin(t), args...), env)
}

// startCmd starts cmd with env added to this process's, its output read as
// it comes; it is killed when the test ends.
func startCmd(t *testing.T, cmd *exec.Cmd, env []string) *liveRun {
	t.Helper()
	l := &liveRun{cmd: cmd, done: make(chan error, 1)}
	l.cmd.Env = append(os.Environ(), env...)
	l.cmd.Stdout, l.cmd.Stderr = l, l
	if err := l.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { l.done <- l.cmd.Wait() }()
	t.Cleanup(func() {
		l.cmd.Process.Kill()
		<-l.done
	})
	return l
}

// waitFor polls the output until cond holds, or fails after limit.
func (l *liveRun) waitFor(t *testing.T, limit time.Duration, what string, cond func(out string) bool) string {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		out := l.String()
		if cond(out) {
			return out
		}
		select {
		case err := <-l.done:
			l.done <- err
			t.Fatalf("waiting for %s: the process ended (%v)\n%s", what, err, l.String())
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s\n%s", limit, what, out)
		}
	}
}

func (l *liveRun) wait(t *testing.T, limit time.Duration) error {
	t.Helper()
	select {
	case err := <-l.done:
		l.done <- err
		return err
	case <-time.After(limit):
		t.Fatalf("still running after %v\n%s", limit, l.String())
		return nil
	}
}

var startedPID = regexp.MustCompile(`\[([a-z-]+)\] started \(pid (\d+)\)`)

// TestProcessesSurviveKills: agent processes killed with SIGKILL at random
// moments (sampling, publishing, waiting, updating, evaluating,
// checkpointing) are started again by the supervisor from their latest
// checkpoint, and once the whole run — the embedded NATS server with it —
// is killed and resumed with --resume; the run ends with the uninterrupted
// run's metrics.
func TestProcessesSurviveKills(t *testing.T) {
	if testing.Short() {
		t.Skip("runs and kills several training processes")
	}
	want := reference(t)
	out := filepath.Join(t.TempDir(), "killed")
	cfg := procConfig(t, out, "0.0001")
	rng := rand.New(rand.NewPCG(5, 6))

	// The whole run killed after a random number of progress lines.
	l := startLive(t, nil, "train", cfg, "--processes", "--verbose") // a line per phase: kills at any of them
	lines := 4 + rng.IntN(20)
	l.waitFor(t, 2*time.Minute, "progress", func(out string) bool { return strings.Count(out, " step ") >= lines })
	l.cmd.Process.Kill()
	l.wait(t, time.Minute)

	// Then agents killed at random moments while the run goes on.
	l = startLive(t, nil, "train", cfg, "--processes", "--verbose", "--resume", "--max-restarts", "20")
	kills := 0
	for kills < 4 {
		out := l.waitFor(t, 2*time.Minute, "an agent process", func(out string) bool {
			return len(startedPID.FindAllString(out, -1)) > kills+1 || strings.Contains(out, "metrics: ")
		})
		if strings.Contains(out, "metrics: ") {
			break // finished before this kill
		}
		seen := strings.Count(out, " step ")
		more := 1 + rng.IntN(8)
		out = l.waitFor(t, 2*time.Minute, "progress", func(out string) bool {
			return strings.Count(out, " step ") >= seen+more || strings.Contains(out, "metrics: ")
		})
		if strings.Contains(out, "metrics: ") {
			break
		}
		time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
		// The latest process of a random agent.
		victim := []string{"gpt-char", "llama-bpe"}[rng.IntN(2)]
		pid := 0
		for _, m := range startedPID.FindAllStringSubmatch(out, -1) {
			if m[1] == victim {
				pid, _ = strconv.Atoi(m[2])
			}
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill %s (pid %d): %v", victim, pid, err)
		}
		kills++
		l.waitFor(t, time.Minute, "the restart", func(out string) bool {
			return strings.Contains(out, fmt.Sprintf("[%s] died of killed", victim)) && len(startedPID.FindAllString(out, -1)) >= kills+2
		})
	}
	if err := l.wait(t, 3*time.Minute); err != nil {
		t.Fatalf("the run failed: %v\n%s", err, l.String())
	}
	if kills < 2 {
		t.Fatalf("only %d kills landed before the run finished", kills)
	}
	t.Logf("the whole run killed once, then %d agent processes", kills)
	sameMetrics(t, "after kills", stableMetrics(t, filepath.Join(out, "metrics.jsonl")), want)
}

// TestAgentJoinsOverTheBus is the two-terminal example: hacrl train
// --processes --agents runs one agent with the bus on a known address, and
// the other joins with hacrl agent --bus. The bus refuses clients without
// its token, and an agent whose config differs; the run ends with the
// single-process run's metrics.
func TestAgentJoinsOverTheBus(t *testing.T) {
	want := reference(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "two")
	cfg := procConfig(t, out, "0.0001")
	token := []string{busTokenEnv + "=s3cret"}
	first := startLive(t, token, "train", cfg, "--processes", "--agents", "gpt-char", "--bus-listen", "127.0.0.1:0")
	text := first.waitFor(t, time.Minute, "the bus address", func(out string) bool { return strings.Contains(out, "agents here") })
	url := regexp.MustCompile(`bus: (nats://\S+)`).FindStringSubmatch(text)[1]

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tok := range []string{"", "wrong"} {
		if c, err := bus.Connect(ctx, url, bus.ClientOptions{Token: tok}); err == nil {
			c.Close()
			t.Fatalf("a client with token %q was let in", tok)
		}
	}
	// Another learning rate: refused, saying the config differs.
	other := procConfig(t, filepath.Join(dir, "other"), "0.0002")
	res := run(t, hacrlBin(t), "", "", token, "agent", other, "--agent", "llama-bpe", "--bus", url, "--run", "procs")
	if res.code == 0 || !strings.Contains(res.stderr, "refuses this process") || !strings.Contains(res.stderr, "agents[0].optimizer.lr") {
		t.Fatalf("an agent with another config: status %d\n%s", res.code, res.stderr)
	}
	res = run(t, hacrlBin(t), "", "", token, "agent", cfg, "--agent", "llama-bpe", "--bus", url)
	if res.code != 0 {
		t.Fatalf("hacrl agent: status %d\n%s", res.code, res.stderr)
	}
	if err := first.wait(t, 2*time.Minute); err != nil {
		t.Fatalf("hacrl train --processes: %v\n%s", err, first.String())
	}
	sameMetrics(t, "two terminals", stableMetrics(t, filepath.Join(out, "metrics.jsonl")), want)
}

// TestAgentsRideOutBusRestart: agents joined to an external NATS server
// (here one this test runs) go on when the server stops mid-run and starts
// again on the same store: nothing published is lost.
func TestAgentsRideOutBusRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a NATS server under two training processes")
	}
	want := reference(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "restart")
	cfg := procConfig(t, out, "0.0001")
	ctx := context.Background()
	opts := bus.ServerOptions{Dir: filepath.Join(dir, "nats")}
	srv, err := bus.StartServer(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	url := srv.URL()
	opts.Listen = strings.TrimPrefix(url, "nats://")
	var agents []*liveRun
	for _, name := range []string{"gpt-char", "llama-bpe"} {
		agents = append(agents, startLive(t, nil, "agent", cfg, "--agent", name, "--bus", url, "--verbose"))
	}
	agents[0].waitFor(t, 2*time.Minute, "step 2", func(out string) bool { return strings.Contains(out, "step 2/4") })
	srv.Close()
	time.Sleep(500 * time.Millisecond)
	if srv, err = bus.StartServer(ctx, opts); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for i, l := range agents {
		if err := l.wait(t, 3*time.Minute); err != nil {
			t.Fatalf("agent %d: %v\n%s", i, err, l.String())
		}
	}
	for _, name := range []string{"gpt-char", "llama-bpe"} {
		got := stableMetrics(t, filepath.Join(out, "agents", name, "metrics.jsonl"))
		var mine []metrics.Record
		for _, r := range want {
			if r.Agent == name {
				mine = append(mine, r)
			}
		}
		var gotMine []metrics.Record
		for _, r := range got {
			if r.Agent == name {
				gotMine = append(gotMine, r)
			}
		}
		sameMetrics(t, name+" across a bus restart", gotMine, mine)
	}
}

// TestBusCommandAndWait: hacrl bus serves a run (refusing clients without
// its token); an agent whose partner never joins gives up after --wait,
// naming it.
func TestBusCommandAndWait(t *testing.T) {
	dir := t.TempDir()
	token := []string{busTokenEnv + "=t0ken"}
	b := startLive(t, token, "bus", "--store", filepath.Join(dir, "nats"))
	text := b.waitFor(t, time.Minute, "the bus address", func(out string) bool { return strings.Contains(out, "interrupt to stop") })
	url := regexp.MustCompile(`bus: (nats://\S+)`).FindStringSubmatch(text)[1]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c, err := bus.Connect(ctx, url, bus.ClientOptions{}); err == nil {
		c.Close()
		t.Fatal("hacrl bus let in a client without the token")
	}
	cfg := procConfig(t, filepath.Join(dir, "alone"), "0.0001")
	res := run(t, hacrlBin(t), "", "", token, "agent", cfg, "--agent", "gpt-char", "--bus", url, "--wait", "2s")
	if res.code != 1 || !strings.Contains(res.stderr, "for the rollouts of llama-bpe at step 1") || !strings.Contains(res.stderr, "llama-bpe (never joined the run)") {
		t.Fatalf("an agent left alone: status %d\n%s", res.code, res.stderr)
	}
	b.cmd.Process.Signal(os.Interrupt)
	if err := b.wait(t, 30*time.Second); err != nil {
		t.Fatalf("hacrl bus after an interrupt: %v", err)
	}
	if out := b.String(); !strings.Contains(out, "interrupt: stopping the bus server") || strings.Contains(out, "checkpoint") {
		t.Errorf("hacrl bus said on an interrupt:\n%s\nwant that it stops the server (it saves no checkpoint)", out)
	}
}

// Dynamic sampling needs every agent in one process: --processes refuses it
// before starting the bus or any agent, naming the key.
func TestProcessesRefuseDynamicSampling(t *testing.T) {
	out := filepath.Join(t.TempDir(), "procs")
	res := run(t, hacrlBin(t), "", "", nil, "train", procConfig(t, out, "0.0001"), "--processes", "--set", "method.dynamic_sampling=true")
	if res.code == 0 || !strings.Contains(res.stderr, "method.dynamic_sampling") || !strings.Contains(res.stderr, "cannot run with agents as processes") {
		t.Fatalf("status %d\n%s", res.code, res.stderr)
	}
	if strings.Contains(res.stderr, "bus:") {
		t.Errorf("the bus started before the refusal:\n%s", res.stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("the refused run left %s behind", out)
	}
}
