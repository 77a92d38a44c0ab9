package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/progress"
	"github.com/hacrl/hacrl/train"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func trainCmd() *cobra.Command {
	var (
		o         trainOverrides
		resume    bool
		overwrite bool
		printDefs bool
		verbose   bool
		procs     procFlags
	)
	cmd := &cobra.Command{
		Use:   "train CONFIG",
		Short: "Train the agents a config names, together, with the chosen method",
		Long: `Train the agents a config file names, with HACPO or a baseline.

The run writes OUT/metrics.jsonl, TensorBoard files in OUT/tb, checkpoints in
OUT/checkpoints and the final agents in OUT/final/<agent>. Interrupt (Ctrl-C)
finishes the current step, saves a checkpoint and exits; --resume continues,
from the latest intact checkpoint, with the same config (steps, out, eval,
checkpoint, backend and engine may change).

--set KEY=VALUE overrides one key of the config file, any key: KEY is its
path with the file's names (steps, eval.every, agents[0].optimizer.lr, or an
agent by name, agents[llama-bpe].sampling.temperature) and VALUE is YAML (2e-4,
true, '[{name: test, split: test, problems: 50}]'). Repeat it for more keys;
they apply in order, before --steps, --seed, --out and --backend, and are
checked as the same edit of the file would be. OUT/config.yaml records them,
and --resume needs the same values (it names any key that differs).

Progress goes to standard error. On a terminal it is a block redrawn in
place: each agent's phase and the numbers of the last step. Otherwise (a
file, a pipe, CI=true) it is one line per step: the step, its time, the
ETA, and per agent the accuracy of its step's responses (and their mean
reward with an external reward), their mean length in tokens (and the share
cut at max_new_tokens), ω, the capability ratio that weighs each other
agent's rollouts, and the shares clipped of its own samples and of the
others' (clip self/cross). --verbose adds a line per phase of every agent's
step. Each evaluation is a line when it happens, with its metrics as
metrics.jsonl names them.

OUT belongs to one run: a second run pointed at it while the first is going
is refused, naming it. A new run needs a missing or empty OUT; --overwrite
deletes an earlier run there (only a directory holding nothing but a run's
files, and never the working or the home directory).

--processes runs every agent in its own process (hacrl agent), joined by a
NATS JetStream server embedded here with its store in OUT/nats; each agent
writes its run in OUT/agents/<agent>, and OUT/metrics.jsonl gets them all,
merged. The numbers are the single-process run's, bit for bit. An agent
process that dies of a signal starts again from its latest checkpoint
(--max-restarts); --agents starts only some agents here, the others joining
with hacrl agent --bus and $HACRL_BUS_TOKEN (docs/processes.md). An interrupt
stops every agent after the same step, each with a checkpoint there; the
command says what each agent did and exits with status 130.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			onInterrupt(checkpointOnInterrupt)
			if resume && overwrite {
				return usage("--resume continues the run in the output directory and --overwrite deletes it: give one of them")
			}
			cfg, err := o.load(cmd.Flags(), args[0])
			if err != nil {
				return err
			}
			if printDefs {
				data, err := train.ResolvedYAML(cfg)
				if err != nil {
					return fmt.Errorf("config %s: %w", args[0], err)
				}
				_, err = cmd.OutOrStdout().Write(data)
				return err
			}
			if procs.on {
				return trainProcesses(cmd.Context(), cmd, args[0], cfg, o, procs, train.Options{Resume: resume, Overwrite: overwrite})
			}
			disp := progress.New(os.Stderr, cfg.AgentNames(), cfg.Steps)
			disp.Verbose = verbose
			defer disp.Close()
			run, err := train.New(cmd.Context(), cfg, train.Options{Resume: resume, Overwrite: overwrite, Observer: disp})
			if err != nil {
				return err
			}
			defer run.Close()
			fmt.Fprint(cmd.ErrOrStderr(), run.Plan())
			sum, err := run.Train(cmd.Context())
			if sum != nil {
				fmt.Print(sum)
			}
			if errors.Is(err, train.ErrInterrupted) {
				fmt.Fprintf(cmd.ErrOrStderr(), "interrupted after step %d; checkpoint saved in %s (continue with --resume)\n", sum.Steps, cfg.Out)
				return exitCode(130)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "metrics: %s/metrics.jsonl · final agents: %s/final\n", cfg.Out, cfg.Out)
			return nil
		},
	}
	f := cmd.Flags()
	o.register(f, "output directory (overrides the config)")
	f.BoolVar(&resume, "resume", false, "continue from the latest intact checkpoint in the output directory")
	f.BoolVar(&overwrite, "overwrite", false, "delete the earlier run in the output directory and start again")
	procs.register(f)
	registerVerbose(f, &verbose)
	f.BoolVar(&printDefs, "print-defaults", false, "print the config with every default filled in (as OUT/config.yaml records it) and exit without training")
	return cmd
}

// trainOverrides are the command-line overrides of a training config that
// train and agent share.
type trainOverrides struct {
	steps, seed int64
	out         string
	backend     string
	sets        []string // --set KEY=VALUE, in order
}

func (o *trainOverrides) register(f *pflag.FlagSet, outHelp string) {
	f.Int64Var(&o.steps, "steps", 0, "number of training steps (overrides the config)")
	f.Int64Var(&o.seed, "seed", 0, "random seed (overrides the config)")
	f.StringVar(&o.out, "out", "", outHelp)
	f.StringVar(&o.backend, "backend", "", "GoMLX backend config, e.g. go:parallelism=-1 or xla:cuda (with -tags xla)")
	f.StringArrayVar(&o.sets, "set", nil, "override a config key, KEY=VALUE: KEY a path such as agents[0].optimizer.lr or agents[NAME].sampling.top_p, VALUE YAML (repeatable)")
}

// load reads the config at path with the overrides given in f applied, and
// validates it.
func (o *trainOverrides) load(f *pflag.FlagSet, path string) (*config.Config, error) {
	sets, err := overrideSets(f, o.sets, []flagKey{{"steps", "steps", o.steps}, {"seed", "seed", o.seed}, {"out", "out", o.out}, {"backend", "backend", o.backend}})
	if err != nil {
		return nil, err
	}
	return config.Load(path, sets...)
}

// flagKey is a flag of its own that overrides a config key: its name in f,
// the key's path and the value the flag parsed.
type flagKey struct {
	flag, key string
	value     any
}

// overrideSets are a command's overrides of its config file, in the order
// they apply: the --set arguments, then each of flags given in f, which are
// checked the same way and whose errors name them. A malformed --set is a
// usage error.
func overrideSets(f *pflag.FlagSet, args []string, flags []flagKey) ([]config.Set, error) {
	sets, err := config.ParseSets(args)
	if err != nil {
		return nil, usage("%v", err)
	}
	for _, fl := range flags {
		if !f.Changed(fl.flag) {
			continue
		}
		s, err := config.FlagOverride("--"+fl.flag, fl.key, fl.value)
		if err != nil {
			return nil, err
		}
		sets = append(sets, s)
	}
	return sets, nil
}

// args are the overrides given in f, as flags for another hacrl process
// (--out aside: each process has its own).
func (o *trainOverrides) args(f *pflag.FlagSet) []string {
	var out []string
	for _, name := range []string{"steps", "seed", "backend"} {
		if fl := f.Lookup(name); fl != nil && fl.Changed {
			out = append(out, "--"+name+"="+fl.Value.String())
		}
	}
	for _, s := range o.sets {
		out = append(out, "--set="+s)
	}
	return out
}
