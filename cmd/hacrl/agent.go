package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/hacrl/hacrl/bus"
	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/progress"
	"github.com/hacrl/hacrl/train"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// busTokenEnv holds the bus token of hacrl agent (not a flag: a process's
// arguments are visible to every user of the machine).
const busTokenEnv = "HACRL_BUS_TOKEN"

// busFlags are how an agent process reaches a run's bus.
type busFlags struct {
	url, run                  string
	nkeyFile, credsFile       string
	caFile, certFile, keyFile string
	wait                      time.Duration
	replicas                  int
}

func (b *busFlags) register(f *pflag.FlagSet) {
	f.StringVar(&b.url, "bus", "", "the run's NATS server or cluster: nats://HOST:PORT[,nats://…] (required)")
	f.StringVar(&b.run, "run", "", "the run's id on the bus: letters, digits, _ and - (default: the config's name, else \"run\")")
	f.StringVar(&b.nkeyFile, "bus-nkey", "", "NATS nkey seed file, for a server that takes nkeys (a token goes in $"+busTokenEnv+")")
	f.StringVar(&b.credsFile, "bus-creds", "", "NATS credentials file (JWT and seed), for a server in operator mode")
	f.StringVar(&b.caFile, "bus-ca", "", "CA certificates (PEM) to verify the server's TLS certificate with")
	f.StringVar(&b.certFile, "bus-cert", "", "client certificate (PEM), for a server that verifies clients")
	f.StringVar(&b.keyFile, "bus-key", "", "client key (PEM), with --bus-cert")
	f.DurationVar(&b.wait, "wait", time.Hour, "how long any wait on the bus may last before the agent gives up: for the other agents' rollouts at a step, or for the bus itself (connecting, publishing, recording)")
	f.IntVar(&b.replicas, "replicas", 1, "servers that keep the run's stream: 1, or 3 on a three-node cluster")
}

func (b *busFlags) clientOptions(agent string) bus.ClientOptions {
	return bus.ClientOptions{
		Name: "hacrl agent " + agent, Token: os.Getenv(busTokenEnv), NKeySeedFile: b.nkeyFile, CredsFile: b.credsFile,
		TLS:  bus.TLSFiles{CAFile: b.caFile, CertFile: b.certFile, KeyFile: b.keyFile},
		Wait: b.wait,
	}
}

func agentCmd() *cobra.Command {
	var (
		name              string
		b                 busFlags
		o                 trainOverrides
		resume, overwrite bool
		verbose           bool
		sess              agentSession
	)
	cmd := &cobra.Command{
		Use:   "agent CONFIG --agent NAME --bus nats://HOST:PORT",
		Short: "Train one agent of a config as its own process, exchanging rollouts with the others over NATS",
		Long: `Train one agent of a run whose agents are separate processes, on this machine
or others, joined through a NATS JetStream server or cluster (--bus).

Every step the agent samples and scores its own responses, publishes them to
the run's stream, waits until every agent's responses of the step are there
(--wait), and learns from the pool exactly as in one process: for the same
config and seed each agent's metrics are the single-process run's, bit for
bit. Weights and checkpoints stay with the agent: it writes its own run in
--out (default OUT/agents/NAME), evaluates and checkpoints itself, and
--resume continues from its latest checkpoint; its rollouts published again
are dropped as duplicates.

Every process of a run must bring the same training config and the same
build: the first one records both on the bus, and a process that differs is
refused, saying what differs. The bus token, if the server takes one, is read
from $` + busTokenEnv + `; --bus-nkey, --bus-creds and --bus-ca/--bus-cert/--bus-key give
the other NATS credentials and TLS.

An interrupt (Ctrl-C, SIGTERM) stops every agent of the run after the same
step: this one asks the others, with the next step whose rollouts it
publishes, and each agent finishes the first step someone asked at, saves a
checkpoint there and exits with status 130. An interrupt from another agent
stops this one the same way. Interrupt again to abort without a checkpoint.

hacrl train --processes starts every agent of a config this way, with an
embedded server, on this machine.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			onInterrupt(agentOnInterrupt)
			if name == "" {
				return usage("--agent NAME is required")
			}
			if b.url == "" {
				return usage("--bus nats://HOST:PORT is required (hacrl train --processes starts a bus itself)")
			}
			if resume && overwrite {
				return usage("--resume continues the agent's run and --overwrite deletes it: give one of them")
			}
			cfg, err := o.load(cmd.Flags(), args[0])
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("out") {
				cfg.Out = filepath.Join(cfg.Out, "agents", name)
			}
			return runAgent(cmd.Context(), cmd.ErrOrStderr(), cmd.OutOrStdout(), cfg, name, b, sess, verbose, train.Options{Resume: resume, Overwrite: overwrite})
		},
	}
	f := cmd.Flags()
	f.StringVar(&name, "agent", "", "the config's agent this process trains (required)")
	b.register(f)
	o.register(f, "the agent's output directory (default OUT/agents/NAME, OUT from the config)")
	f.BoolVar(&resume, "resume", false, "continue from the agent's latest intact checkpoint")
	f.BoolVar(&overwrite, "overwrite", false, "delete the agent's earlier run in its output directory and start again")
	sess.register(f)
	registerVerbose(f, &verbose)
	return cmd
}

// runAgent joins the run on the bus as agent name and trains it. Once ctx
// is cancelled (or sess's supervisor says so) the agent asks the others to
// stop (stop.go); it goes on, bus waits and all, until they agree.
func runAgent(ctx context.Context, stderr, stdout io.Writer, cfg *config.Config, name string, b busFlags, sess agentSession, verbose bool, opts train.Options) error {
	interrupt, cancel := sess.interrupts(ctx, stderr)
	defer cancel()
	ctx = context.WithoutCancel(ctx)
	names := cfg.AgentNames()
	if b.wait <= 0 {
		return usage("--wait must be positive, got %v", b.wait)
	}
	disp := progress.New(stderr, []string{name}, cfg.Steps)
	disp.Verbose = verbose
	defer disp.Close()
	st := &busStatus{disp: disp, agent: name, url: b.url, wait: b.wait}
	var conn *bus.Conn
	err := st.during(st.onBus("connect"), func() (err error) {
		conn, err = bus.Connect(ctx, b.url, b.clientOptions(name))
		return err
	})
	if err != nil {
		return st.advise(err)
	}
	defer conn.Close()
	var run *bus.Run
	err = st.during(st.onBus("open the run"), func() (err error) {
		run, err = openRun(ctx, conn, cfg, b.run, b.replicas)
		return err
	})
	if err != nil {
		return st.advise(err)
	}
	id := run.ID()
	since, err := sess.since(ctx, run)
	if err != nil {
		return st.advise(err)
	}
	beat, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	go keepAlive(beat, run, name, disp)

	opts.Observer = disp
	ex := &busExchange{run: run, agents: names, wait: b.wait, status: st}
	opts.Member = &train.Member{Agent: name, Exchange: &stoppingExchange{ex: ex, since: since, log: disp.Log}}
	tr, err := train.New(interrupt, cfg, opts)
	if err != nil {
		return err
	}
	defer tr.Close()
	fmt.Fprint(stderr, tr.Plan())
	fmt.Fprintf(stderr, "agent %s of run %s on %s: steps %d to %d, writing %s\n", name, id, b.url, tr.StartStep()+1, cfg.Steps, cfg.Out)
	sum, err := tr.Train(interrupt)
	if sum != nil {
		fmt.Fprint(stdout, sum)
	}
	if errors.Is(err, train.ErrInterrupted) {
		fmt.Fprintf(stderr, "%v; checkpoint saved in %s (continue with --resume)\n", err, cfg.Out)
		return exitCode(130)
	}
	if err != nil {
		return st.advise(err)
	}
	// For hacrl train --processes, which merges the metrics once every agent is done.
	return st.advise(st.during(st.onBus("record that it finished"), func() error { return run.Finish(ctx, name, sum.Steps) }))
}

// openRun opens cfg's run on the bus (id "" for the default): its identity
// is the training config's hash and this build's version, and a refusal
// names the config keys that differ.
func openRun(ctx context.Context, conn *bus.Conn, cfg *config.Config, id string, replicas int) (*bus.Run, error) {
	training, err := train.TrainingConfig(cfg)
	if err != nil {
		return nil, err
	}
	hash, err := train.ConfigHash(cfg)
	if err != nil {
		return nil, err
	}
	if id == "" {
		id = defaultRunID(cfg.Name)
	}
	run, err := conn.OpenRun(ctx, bus.RunSpec{ID: id, ConfigHash: hash, CodeVersion: codeVersion(), Config: training, Replicas: replicas})
	var mismatch *bus.MismatchError
	if errors.As(err, &mismatch) && mismatch.RecordedConfig != nil && mismatch.Recorded.ConfigHash != hash {
		if diff, derr := train.DiffTrainingConfigs(mismatch.RecordedConfig, training, "run", "this process"); derr == nil && len(diff) > 0 {
			return nil, fmt.Errorf("%w\nthe training config differs from the run's:\n  %s", err, strings.Join(diff, "\n  "))
		}
	}
	return run, err
}

// heartbeatEvery is how often an agent process says it is alive: often
// enough that an agent cut off for a short --wait is told from a slow one.
const heartbeatEvery = time.Second

// busExchange is train.Exchange over a run on the bus. The bus counts steps
// from 0 with the setup exchange first, so train's step s is the bus's s+1.
type busExchange struct {
	run    *bus.Run
	agents []string
	wait   time.Duration
	status *busStatus
	// lost is a wait on the bus that ran out in Keep, which the trainer
	// only logs: the next exchange fails with it at once, rather than wait
	// as long again.
	lost error
}

func (e *busExchange) Share(ctx context.Context, step int, agent string, payload []byte) (map[string][]byte, error) {
	if e.lost != nil {
		return nil, fmt.Errorf("the bus did not answer after the last checkpoint: %w", e.lost)
	}
	s := step - train.SetupStep
	at := fmt.Sprintf("step %d", s)
	if step == train.SetupStep {
		at = "the setup exchange"
	}
	err := e.status.during(e.status.onBus("publish "+at), func() error { return e.run.Publish(ctx, s, agent, payload) })
	if err != nil {
		return nil, err
	}
	others := slices.DeleteFunc(slices.Clone(e.agents), func(a string) bool { return a == agent })
	var cw collectWait
	cw.set(bus.Waiting{Missing: others})
	var got map[string][]byte
	err = e.status.during(cw.what(e.status, at), func() (err error) {
		got, err = e.run.CollectWatching(ctx, s, others, e.wait, cw.set)
		return err
	})
	var miss *bus.MissingError
	if errors.As(err, &miss) {
		return nil, e.explain(ctx, step, miss)
	}
	if err != nil {
		return nil, err
	}
	got[agent] = payload
	return got, nil
}

// explain says which agents a step waited for in vain, and when each was
// last heard of.
func (e *busExchange) explain(ctx context.Context, step int, miss *bus.MissingError) error {
	what := fmt.Sprintf("step %d", step+1)
	if step == train.SetupStep {
		what = "the setup exchange"
	}
	if miss.Last != nil {
		// Reading failed (the bus cut off from here): asking it who is
		// alive would wait as long again.
		return fmt.Errorf("waited %v (--wait) for the rollouts of %s at %s: this agent could not read from the bus (%s): check that %s is up and reachable from this machine, then start this agent again with --resume: %w",
			miss.Waited.Round(time.Second), strings.Join(miss.Missing, ", "), what, noAnswer(miss.Last), e.status.url, miss)
	}
	seen := map[string]time.Time{}
	actx, cancel := context.WithTimeout(ctx, askAliveFor)
	defer cancel()
	alive, aerr := e.run.Agents(actx)
	for _, a := range alive {
		seen[a.Name] = a.LastSeen
	}
	var parts []string
	for _, a := range miss.Missing {
		switch t, ok := seen[a]; {
		case aerr != nil:
			parts = append(parts, fmt.Sprintf("%s (the bus did not say when it was last heard of)", a))
		case !ok:
			parts = append(parts, fmt.Sprintf("%s (never joined the run)", a))
		case time.Since(t) > 3*heartbeatEvery:
			parts = append(parts, fmt.Sprintf("%s (last heard of %s ago: its process is gone or cut off)", a, time.Since(t).Round(time.Second)))
		default:
			parts = append(parts, fmt.Sprintf("%s (alive, still working on it)", a))
		}
	}
	return fmt.Errorf("waited %v (--wait) for the rollouts of %s at %s: %s; start a missing agent again with --resume, or give slower agents a longer --wait: %w",
		miss.Waited.Round(time.Second), strings.Join(miss.Missing, ", "), what, strings.Join(parts, "; "), miss)
}

// askAliveFor bounds asking the bus, after a wait ran out, when each
// missing agent was last heard of.
const askAliveFor = 5 * time.Second

func (e *busExchange) Keep(ctx context.Context, agent string, from int) error {
	err := e.status.during(e.status.onBus("record the steps it still needs"), func() error { return e.keep(ctx, agent, from) })
	var we *bus.WaitError
	if errors.As(err, &we) {
		e.lost = err
	}
	return err
}

func (e *busExchange) keep(ctx context.Context, agent string, from int) error {
	if err := e.run.Need(ctx, agent, from-train.SetupStep); err != nil {
		return err
	}
	first, ok, err := e.run.Needed(ctx, e.agents)
	if err != nil || !ok {
		return err
	}
	steps, err := e.run.Steps(ctx)
	if err != nil {
		return err
	}
	for _, s := range steps {
		// Step 0, the setup exchange, is read again by every restarted process.
		if s > 0 && s < first {
			if err := e.run.DropStep(ctx, s); err != nil {
				return err
			}
		}
	}
	return nil
}

var notRunID = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// defaultRunID is the bus run id of a config named name: the name with
// other characters as '-', at most 64, or "run".
func defaultRunID(name string) string {
	id := strings.Trim(notRunID.ReplaceAllString(name, "-"), "-")
	if len(id) > 64 {
		id = id[:64]
	}
	if id == "" {
		return "run"
	}
	return id
}

// codeVersion identifies this build for the bus: the module version and VCS
// revision the toolchain stamped (with "+dirty" for a modified tree), else
// the SHA-256 of the executable.
func codeVersion() string {
	if version, rev, dirty := buildStamp(); rev != "" && !dirty {
		return version + " " + rev
	}
	exe, err := os.Executable()
	if err == nil {
		if data, err := os.ReadFile(exe); err == nil {
			sum := sha256.Sum256(data)
			return "sha256:" + hex.EncodeToString(sum[:])
		}
	}
	return "unknown"
}
