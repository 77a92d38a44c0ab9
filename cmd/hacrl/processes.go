package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hacrl/hacrl/bus"
	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/metrics"
	"github.com/hacrl/hacrl/train"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// procFlags are hacrl train's flags for a run of agent processes.
type procFlags struct {
	on       bool
	only     []string
	listen   string
	restarts int
	wait     time.Duration
}

func (p *procFlags) register(f *pflag.FlagSet) {
	f.BoolVar(&p.on, "processes", false, "run every agent in its own process (hacrl agent), joined by a NATS JetStream server embedded in this one")
	f.StringSliceVar(&p.only, "agents", nil, "with --processes: start only these agents here; the others join with hacrl agent --bus")
	f.StringVar(&p.listen, "bus-listen", "", "with --processes: the embedded server's address host:port (default 127.0.0.1 on a free port)")
	f.IntVar(&p.restarts, "max-restarts", 3, "with --processes: how often an agent process that dies (killed, out of memory) is started again with --resume")
	f.DurationVar(&p.wait, "wait", time.Hour, "with --processes: how long an agent waits at a step for the others' rollouts")
}

// trainProcesses runs cfg's agents as processes of this executable (hacrl
// agent), over a NATS server embedded here with its store in OUT/nats, each
// agent writing its run in OUT/agents/<name>. An agent process that dies of
// a signal is started again with --resume (at most p.restarts times); one
// that fails stops the run. At the end the agents' metrics are merged into
// OUT/metrics.jsonl, in the order one process writes them.
func trainProcesses(ctx context.Context, cmd *cobra.Command, cfgPath string, cfg *config.Config, o trainOverrides, p procFlags, opts train.Options) error {
	stderr := &lockedWriter{w: cmd.ErrOrStderr()}
	names := make([]string, len(cfg.Agents))
	for i, a := range cfg.Agents {
		names[i] = a.Name
	}
	local, err := p.localAgents(names)
	if err != nil {
		return err
	}
	token := os.Getenv(busTokenEnv)
	if token == "" && len(local) < len(names) {
		return usage("--agents: the other agents join with the bus's token: set $%s (here and for them)", busTokenEnv)
	}
	if token == "" {
		token = randomToken()
	}
	release, err := train.ClaimOut(cfg.Out, opts)
	if err != nil {
		return err
	}
	defer release()
	srv, conn, run, err := startBus(ctx, cfg, p.listen, token)
	if err != nil {
		return err
	}
	defer srv.Close()
	defer conn.Close()
	fmt.Fprintf(stderr, "bus: %s (store %s); agents here: %s\n", srv.URL(), filepath.Join(cfg.Out, "nats"), strings.Join(local, ", "))
	if len(local) < len(names) {
		fmt.Fprintf(stderr, "the other agents join with: hacrl agent %s --agent NAME --bus %s (with $%s)\n", cfgPath, srv.URL(), busTokenEnv)
	}

	exe, err := os.Executable()
	if err != nil {
		return err
	}
	base := []string{"agent", cfgPath, "--bus", srv.URL(), "--wait", p.wait.String()}
	base = append(base, o.args(cmd.Flags())...)
	sup := &supervisor{ctx: ctx, exe: exe, env: append(os.Environ(), busTokenEnv+"="+token), stdout: &lockedWriter{w: cmd.OutOrStdout()}, stderr: stderr, restarts: p.restarts}
	runErr := sup.run(local, func(name string, resume bool) []string {
		args := append(slices.Clone(base), "--agent", name, "--out", filepath.Join(cfg.Out, "agents", name))
		if resume || opts.Resume {
			args = append(args, "--resume")
		}
		return args
	})
	var ec exitCode
	if interrupted := errors.As(runErr, &ec) && ec == 130; runErr != nil && !interrupted {
		return runErr
	}
	if runErr == nil && len(local) < len(names) {
		if err := waitElsewhere(ctx, stderr, run, cfg, names, local, p.wait); err != nil {
			return err
		}
	}
	// Finished or interrupted (each agent checkpointed): what they wrote so far.
	if err := mergeMetrics(stderr, cfg.Out, names); err != nil {
		return err
	}
	if runErr != nil {
		fmt.Fprintf(stderr, "interrupted; every agent saved a checkpoint (continue with --processes --resume)\n")
		return runErr
	}
	fmt.Fprintf(stderr, "metrics: %s/metrics.jsonl · each agent's run: %s/agents/<agent> (final weights in its final/<agent>)\n", cfg.Out, cfg.Out)
	return nil
}

// localAgents are the agents to start here: --agents, or all of names.
func (p *procFlags) localAgents(names []string) ([]string, error) {
	if len(p.only) == 0 {
		return names, nil
	}
	for _, n := range p.only {
		if !slices.Contains(names, n) {
			return nil, usage("--agents: %q is not one of the config's agents %v", n, names)
		}
	}
	return p.only, nil
}

// startBus starts the run's embedded server, with its store in OUT/nats,
// and records the run's identity on it before any agent starts: an agent
// that brings another config or build is refused, however early it joins.
func startBus(ctx context.Context, cfg *config.Config, listen, token string) (*bus.Server, *bus.Conn, *bus.Run, error) {
	srv, err := bus.StartServer(ctx, bus.ServerOptions{Dir: filepath.Join(cfg.Out, "nats"), Listen: listen, Auth: bus.Auth{Token: token}})
	if err != nil {
		return nil, nil, nil, err
	}
	conn, err := srv.Connect(ctx, bus.ClientOptions{Name: "hacrl train --processes", Token: token})
	if err != nil {
		srv.Close()
		return nil, nil, nil, err
	}
	run, err := openRun(ctx, conn, cfg, "", 1)
	if err != nil {
		conn.Close()
		srv.Close()
		return nil, nil, nil, err
	}
	return srv, conn, run, nil
}

// waitElsewhere waits, at most wait, until the agents not run here have
// finished the run (they say so on the bus).
func waitElsewhere(ctx context.Context, stderr io.Writer, r *bus.Run, cfg *config.Config, names, local []string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	said := false
	for {
		var left []string
		for _, n := range names {
			if slices.Contains(local, n) {
				continue
			}
			if steps, ok, err := r.Finished(ctx, n); err != nil {
				return err
			} else if !ok || steps < cfg.Steps {
				left = append(left, n)
			}
		}
		if len(left) == 0 {
			return nil
		}
		if !said {
			fmt.Fprintf(stderr, "waiting for the agents elsewhere to finish: %s\n", strings.Join(left, ", "))
			said = true
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %v (--wait) for %s to finish the run", wait, strings.Join(left, ", "))
		}
		select {
		case <-ctx.Done():
			return exitCode(130)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func randomToken() string {
	b := make([]byte, 24)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// supervisor runs the agent processes and starts again those that die.
type supervisor struct {
	ctx      context.Context
	exe      string
	env      []string
	stdout   io.Writer
	stderr   io.Writer
	restarts int

	mu    sync.Mutex
	procs map[string]*os.Process
}

// run starts one process per agent, args giving each its arguments, and
// waits for all. The first failure (a non-zero exit, or more deaths than
// restarts) stops the others: interrupted first, killed 10 s later.
func (s *supervisor) run(agents []string, args func(name string, resume bool) []string) error {
	s.procs = map[string]*os.Process{}
	errs := make(chan error, len(agents))
	failed := make(chan struct{})
	var once sync.Once
	for _, name := range agents {
		go func() {
			err := s.keep(name, args, failed)
			if err != nil {
				once.Do(func() { close(failed) })
			}
			errs <- err
		}()
	}
	// An interrupt of this process reaches each agent once: it finishes its
	// step, saves a checkpoint and exits.
	stop := context.AfterFunc(s.ctx, func() { s.signalAll(os.Interrupt) })
	defer stop()
	var first error
	for range agents {
		if err := <-errs; err != nil && first == nil {
			first = err
			s.stopAll()
		}
	}
	return first
}

// keep runs agent name's process until it succeeds, starting it again with
// --resume when it dies of a signal.
func (s *supervisor) keep(name string, args func(string, bool) []string, failed <-chan struct{}) error {
	// The parent-death signal (childAttr) follows the thread that started
	// the child: keep that thread for as long as the child lives.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for attempt := 0; ; attempt++ {
		c := exec.Command(s.exe, args(name, attempt > 0)...)
		c.Env = s.env
		c.SysProcAttr = childAttr()
		var wg sync.WaitGroup
		tag := "[" + name + "] "
		stdout, stderr := prefixWriter(&wg, s.stdout, tag), prefixWriter(&wg, s.stderr, tag)
		c.Stdout, c.Stderr = stdout, stderr
		if err := c.Start(); err != nil {
			stdout.Close()
			stderr.Close()
			return fmt.Errorf("agent %s: %w", name, err)
		}
		s.mu.Lock()
		s.procs[name] = c.Process
		s.mu.Unlock()
		fmt.Fprintf(s.stderr, "%sstarted (pid %d)\n", tag, c.Process.Pid)
		err := c.Wait()
		stdout.Close()
		stderr.Close()
		wg.Wait()
		s.mu.Lock()
		delete(s.procs, name)
		s.mu.Unlock()
		if err == nil {
			return nil
		}
		select {
		case <-failed:
			return nil // stopped because another agent failed
		default:
		}
		if s.ctx.Err() != nil {
			return exitCode(130)
		}
		ws, ok := c.ProcessState.Sys().(syscall.WaitStatus)
		if !ok || !ws.Signaled() {
			return fmt.Errorf("agent %s: %v (its output above says why)", name, err)
		}
		if attempt >= s.restarts {
			return fmt.Errorf("agent %s: died of %v %d times (--max-restarts %d)", name, ws.Signal(), attempt+1, s.restarts)
		}
		fmt.Fprintf(s.stderr, "[%s] died of %v; starting it again from its latest checkpoint (%d of %d restarts)\n", name, ws.Signal(), attempt+1, s.restarts)
	}
}

// stopAll interrupts every running agent process (each finishes its step if
// it can and saves a checkpoint) and kills those still running 10 s later.
func (s *supervisor) stopAll() {
	s.signalAll(os.Interrupt)
	time.AfterFunc(10*time.Second, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, p := range s.procs {
			p.Kill()
		}
	})
}

// prefixWriter is a pipe whose lines reach w each after p, one Write per
// line (w must take concurrent Writes: a lockedWriter), so that the lines of
// several processes interleave whole; wg counts the copy until the pipe is
// closed.
func prefixWriter(wg *sync.WaitGroup, w io.Writer, p string) *io.PipeWriter {
	pr, pw := io.Pipe()
	wg.Go(func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			w.Write([]byte(p + sc.Text() + "\n"))
		}
		pr.CloseWithError(sc.Err())
	})
	return pw
}

// mergeMetrics writes OUT/metrics.jsonl from the agents' own files
// (OUT/agents/<name>/metrics.jsonl), in the order one process writes its
// metrics: by step, each agent's training record in config order, then the
// run-wide record (times the slowest agent's, reward calls summed), then
// the evaluations. Agents that wrote nothing here (run elsewhere) are left
// out, and said so.
func mergeMetrics(stderr io.Writer, out string, agents []string) error {
	type key struct{ step, part, agent int } // part: 0 training, 1 run-wide, 2 eval
	recs := map[key]metrics.Record{}
	var missing []string
	for i, name := range agents {
		path := filepath.Join(out, "agents", name, "metrics.jsonl")
		rs, err := metrics.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			missing = append(missing, name)
			continue
		}
		if torn := metrics.Torn(err); torn != nil {
			fmt.Fprintf(stderr, "%v\n", torn)
		} else if err != nil {
			return err
		}
		for _, r := range rs {
			switch {
			case r.Agent == "":
				k := key{r.Step, 1, 0}
				recs[k] = mergeWide(recs[k], r)
			case isEval(r):
				recs[key{r.Step, 2, i}] = r
			default:
				recs[key{r.Step, 0, i}] = r
			}
		}
	}
	keys := make([]key, 0, len(recs))
	for k := range recs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		if a.step != b.step {
			return a.step - b.step
		}
		if a.part != b.part {
			return a.part - b.part
		}
		return a.agent - b.agent
	})
	sorted := make([]metrics.Record, len(keys))
	for i, k := range keys {
		sorted[i] = recs[k]
	}
	if err := metrics.WriteFile(filepath.Join(out, "metrics.jsonl"), sorted); err != nil {
		return err
	}
	if len(missing) > 0 {
		fmt.Fprintf(stderr, "metrics of %s are not in %s (trained elsewhere): merge their metrics.jsonl by hand\n", strings.Join(missing, ", "), out)
	}
	return nil
}

func isEval(r metrics.Record) bool {
	for k := range r.Values {
		if strings.HasPrefix(k, "eval/") {
			return true
		}
	}
	return false
}

// mergeWide folds one process's run-wide record into acc: reward calls add
// up, times (every other key) take the slowest.
func mergeWide(acc, r metrics.Record) metrics.Record {
	if acc.Values == nil {
		acc = metrics.Record{Step: r.Step, Time: r.Time, Values: map[string]float64{}}
	}
	for k, v := range r.Values {
		if k == "reward/calls" {
			acc.Values[k] += v
		} else {
			acc.Values[k] = max(acc.Values[k], v)
		}
	}
	return acc
}

// lockedWriter serialises Writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// signalAll sends sig to every running agent process.
func (s *supervisor) signalAll(sig os.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.procs {
		p.Signal(sig)
	}
}
