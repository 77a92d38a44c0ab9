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
	f.DurationVar(&p.wait, "wait", time.Hour, "with --processes: how long any wait of an agent on the bus may last (the others' rollouts at a step, connecting, publishing, recording)")
}

// trainProcesses runs cfg's agents as processes of this executable (hacrl
// agent), over a NATS server embedded here with its store in OUT/nats, each
// agent writing its run in OUT/agents/<name>. An agent process that dies of
// a signal is started again with --resume (at most p.restarts times); one
// that fails stops the run. An interrupt of this process reaches every agent
// once, and the agents stop after the same step (stop.go). At the end the
// agents' metrics are merged into OUT/metrics.jsonl, in the order one
// process writes them, and unless every agent finished, each agent's
// outcome is said.
func trainProcesses(ctx context.Context, cmd *cobra.Command, cfgPath string, cfg *config.Config, o trainOverrides, p procFlags, opts train.Options) error {
	onInterrupt("telling every agent to stop: they stop after the same step and save a checkpoint there")
	stderr := &lockedWriter{w: cmd.ErrOrStderr()}
	if err := train.CheckMembers(cfg); err != nil {
		return fmt.Errorf("config %s: %w", cfgPath, err)
	}
	names := cfg.AgentNames()
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
	if err != nil && ctx.Err() != nil {
		fmt.Fprintln(stderr, "interrupted before any agent started")
		return exitCode(130)
	}
	if err != nil {
		return err
	}
	defer srv.Close()
	defer conn.Close()
	fmt.Fprintf(stderr, "bus: %s (store %s); agents here: %s\n", srv.URL(), filepath.Join(cfg.Out, "nats"), strings.Join(local, ", "))
	if len(local) < len(names) {
		var sets strings.Builder
		for _, s := range o.sets {
			sets.WriteString(" " + config.SetFlag(s))
		}
		fmt.Fprintf(stderr, "the other agents join with: hacrl agent %s%s --agent NAME --bus %s (with $%s)\n", cfgPath, sets.String(), srv.URL(), busTokenEnv)
	}

	exe, err := os.Executable()
	if err != nil {
		return err
	}
	// Stop requests of earlier sessions (before this --resume) do not count.
	start, err := run.Sequence(ctx)
	if err != nil && ctx.Err() == nil {
		return err
	}
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "interrupted before any agent started")
		return exitCode(130)
	}
	base := []string{"agent", cfgPath, "--bus", srv.URL(), "--wait", p.wait.String()}
	base = append(base, o.args(cmd.Flags())...)
	if v, _ := cmd.Flags().GetBool("verbose"); v {
		base = append(base, "--verbose")
	}
	sup := &supervisor{ctx: ctx, exe: exe, env: append(os.Environ(), busTokenEnv+"="+token), stdout: &lockedWriter{w: cmd.OutOrStdout()}, stderr: stderr, restarts: p.restarts}
	outcomes := sup.run(local, func(name string, resume bool) []string {
		args := append(slices.Clone(base), "--agent", name, "--out", filepath.Join(cfg.Out, "agents", name))
		if resume || opts.Resume {
			args = append(args, "--resume")
		}
		sess := agentSession{start: int64(start), stopFD: 3} // the stop pipe, ExtraFiles[0]
		return append(args, sess.args()...)
	})
	// Interrupted: an agent stopped (after an interrupt here or elsewhere),
	// or this process was interrupted and not every agent finished the run.
	interrupted, failed := false, error(nil)
	for _, o := range outcomes {
		switch {
		case o.how == interruptedOutcome:
			interrupted = true
		case o.how != finishedOutcome:
			interrupted = interrupted || ctx.Err() != nil
			if failed == nil {
				failed = fmt.Errorf("agent %s %s", o.name, o)
			}
		}
	}
	if interrupted || failed != nil {
		sayOutcomes(stderr, cfg.Out, outcomes)
	}
	if failed != nil && !interrupted {
		return failed
	}
	if !interrupted && len(local) < len(names) {
		if err := waitElsewhere(ctx, stderr, run, cfg, names, local, p.wait); err != nil {
			return err
		}
	}
	// Finished or stopped: what the agents wrote so far.
	if err := mergeMetrics(stderr, cfg.Out, names); err != nil {
		return err
	}
	if interrupted {
		fmt.Fprintf(stderr, "interrupted: continue with hacrl train %s --processes --resume\n", cfgPath)
		return exitCode(130)
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

	mu       sync.Mutex
	procs    map[string]*agentProc
	stopping bool // the agents were told to stop: none is started again
}

// agentProc is a running agent process and the write end of its stop pipe
// (nil once closed).
type agentProc struct {
	p    *os.Process
	stop *os.File
}

// interrupt closes the agent's stop pipe, once: the agent asks the others
// to stop (stop.go).
func (a *agentProc) interrupt() {
	if a.stop != nil {
		a.stop.Close()
		a.stop = nil
	}
}

// How an agent process ended.
const (
	finishedOutcome    = "finished"
	interruptedOutcome = "interrupted" // status 130: stopped with the others after a step
	failedOutcome      = "failed"
	killedOutcome      = "killed" // died of a signal, not started again
)

// outcome is how an agent's process ended, the last time it ran.
type outcome struct {
	name, how string
	err       error // failed or killed: why
}

func (o outcome) String() string {
	if o.err != nil {
		return o.how + ": " + o.err.Error()
	}
	return o.how
}

// run starts one process per agent, args giving each its arguments, and
// waits for all; it returns how each ended, in the order of agents. An
// interrupt of this process reaches each agent once, through its stop pipe,
// even one that starts later: the agents stop after the same step and exit
// with status 130, the normal end of an interrupted run. The first failure
// (another non-zero exit, or more deaths than restarts) stops the others:
// interrupted first, killed 10 s later.
func (s *supervisor) run(agents []string, args func(name string, resume bool) []string) []outcome {
	s.procs = map[string]*agentProc{}
	type ended struct {
		i int
		o outcome
	}
	ends := make(chan ended, len(agents))
	for i, name := range agents {
		go func() { ends <- ended{i, s.keep(name, args)} }()
	}
	stop := context.AfterFunc(s.ctx, s.interruptAll)
	defer stop()
	out := make([]outcome, len(agents))
	for range agents {
		e := <-ends
		out[e.i] = e.o
		if e.o.how == failedOutcome || e.o.how == killedOutcome {
			s.stopAll()
		}
	}
	return out
}

// keep runs agent name's process until it ends other than by a signal,
// starting it again with --resume when it dies of one, unless the agents
// were told to stop or one stopped.
func (s *supervisor) keep(name string, args func(string, bool) []string) outcome {
	// The parent-death signal (childAttr) follows the thread that started
	// the child: keep that thread for as long as the child lives.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for attempt := 0; ; attempt++ {
		c := exec.Command(s.exe, args(name, attempt > 0)...)
		c.Env = s.env
		c.SysProcAttr = childAttr()
		pr, pw, err := os.Pipe()
		if err != nil {
			return outcome{name, failedOutcome, err}
		}
		c.ExtraFiles = []*os.File{pr}
		var wg sync.WaitGroup
		tag := "[" + name + "] "
		stdout, stderr := prefixWriter(&wg, s.stdout, tag), prefixWriter(&wg, s.stderr, tag)
		c.Stdout, c.Stderr = stdout, stderr
		err = c.Start()
		pr.Close()
		if err != nil {
			pw.Close()
			stdout.Close()
			stderr.Close()
			return outcome{name, failedOutcome, err}
		}
		proc := &agentProc{p: c.Process, stop: pw}
		s.mu.Lock()
		s.procs[name] = proc
		if s.stopping {
			proc.interrupt() // started as the interrupt came
		}
		s.mu.Unlock()
		fmt.Fprintf(s.stderr, "%sstarted (pid %d)\n", tag, c.Process.Pid)
		err = c.Wait()
		stdout.Close()
		stderr.Close()
		wg.Wait()
		s.mu.Lock()
		delete(s.procs, name)
		proc.interrupt()
		stopping := s.stopping
		s.mu.Unlock()
		ws, _ := c.ProcessState.Sys().(syscall.WaitStatus)
		switch {
		case err == nil:
			return outcome{name, finishedOutcome, nil}
		case c.ProcessState.ExitCode() == 130:
			// The agents agreed to stop after a step, whoever was interrupted:
			// the others stop there too, and none is started again.
			s.mu.Lock()
			s.stopping = true
			s.mu.Unlock()
			return outcome{name, interruptedOutcome, nil}
		case !ws.Signaled():
			return outcome{name, failedOutcome, fmt.Errorf("%v (its output above says why)", err)}
		case stopping:
			return outcome{name, killedOutcome, fmt.Errorf("died of %v while stopping", ws.Signal())}
		case attempt >= s.restarts:
			return outcome{name, killedOutcome, fmt.Errorf("died of %v %d times (--max-restarts %d)", ws.Signal(), attempt+1, s.restarts)}
		}
		fmt.Fprintf(s.stderr, "[%s] died of %v; starting it again from its latest checkpoint (%d of %d restarts)\n", name, ws.Signal(), attempt+1, s.restarts)
	}
}

// interruptAll tells every agent process, once, to stop, and every agent
// started later too.
func (s *supervisor) interruptAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopping = true
	for _, p := range s.procs {
		p.interrupt()
	}
}

// stopAll interrupts every running agent process (each finishes its step if
// it can and saves a checkpoint) and kills those still running 10 s later.
func (s *supervisor) stopAll() {
	s.interruptAll()
	time.AfterFunc(10*time.Second, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, p := range s.procs {
			p.p.Kill()
		}
	})
}

// sayOutcomes says how each agent's process ended and the step of its
// latest checkpoint in OUT/agents/<name>.
func sayOutcomes(w io.Writer, out string, outcomes []outcome) {
	for _, o := range outcomes {
		ckpt := "no checkpoint"
		if step, ok := train.LatestCheckpoint(filepath.Join(out, "agents", o.name)); ok {
			ckpt = fmt.Sprintf("checkpoint at step %d", step)
		}
		fmt.Fprintf(w, "[%s] %s; %s\n", o.name, o, ckpt)
	}
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
