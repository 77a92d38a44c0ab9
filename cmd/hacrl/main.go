// Command hacrl trains several heterogeneous language models together with
// collaborative RL (HACPO), evaluates them, and provides the tools around it:
// supervised warm start, tokenizer training, answer verification, plots and
// engine benchmarks. Run `hacrl help` for the commands.
//
// Commands that print results print them, and only them, on standard output
// (JSON where they say so); progress and diagnostics go to standard error.
// The exit status is 0 on success, 1 on failure (verify: not equal), 2 on a
// usage error and 130 when interrupted.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/internal/gcpace"
	"github.com/hacrl/hacrl/internal/shared"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		what := "stopping"
		if p := interruptNote.Load(); p != nil {
			what = *p
		}
		fmt.Fprintf(os.Stderr, "\ninterrupt: %s (interrupt again to abort)\n", what)
		cancel()
		<-sigs
		fmt.Fprintln(os.Stderr, "aborted")
		os.Exit(130)
	}()
	if os.Getenv("GOGC") == "" {
		// Model-sized heaps: at most gcHeadroom of garbage, not as much as is live.
		go gcpace.Keep(ctx, gcHeadroom, 200*time.Millisecond)
	}
	os.Exit(execute(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// interruptNote says what the running command does on a first interrupt
// (onInterrupt); without one it says "stopping".
var interruptNote atomic.Pointer[string]

// onInterrupt sets what the first interrupt of this process is said to do.
func onInterrupt(what string) { interruptNote.Store(&what) }

// checkpointOnInterrupt is what hacrl train in one process does on an interrupt.
const checkpointOnInterrupt = "finishing the current step and saving a checkpoint"

// gcHeadroom is the garbage hacrl lets its heap collect above what is live
// before a collection, once the live heap is larger than that (package
// gcpace); setting GOGC in the environment turns this off.
const gcHeadroom = 512 << 20

// execute runs hacrl with args (and the given standard streams) and returns its exit status: 0 on success,
// the status a command asked for (exitCode), 2 for a usage error (with a
// pointer to the command's help on stderr), 130 when ctx was cancelled and 1
// for any other error.
func execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := rootCmd()
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetArgs(positionalNumbers(root, args))
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	var ec exitCode
	if errors.As(err, &ec) {
		return int(ec) // the command already said why
	}
	fmt.Fprintln(stderr, "hacrl:", err)
	switch {
	case errors.As(err, &usageErr{}):
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		return 2
	case ctx.Err() != nil:
		return 130
	}
	return 1
}

const rootLong = `hacrl trains several different language models together on one verifiable
task with HACPO (heterogeneous agent collaborative RL), and evaluates them.

Results go to standard output (JSON where a command says so), progress and
diagnostics to standard error.

The shared data (the math benchmarks and training sets that --set, benchmark:
and dataset.path name) is the first of: --data DIR; $HACRL_DATA;
$HACRL_SHARED/data; shared/data in the parent or grandparent of the binary's
directory; ../shared/data beside the repository found above the working
directory.

The compute backend is --backend (or a run config's backend:), overridden by
$HACRL_BACKEND or $GOMLX_BACKEND: go (the CPU, the default) or, in a build
with -tags xla, xla:cuda (GPUs) and xla:cpu. The XLA backend loads a PJRT
plugin found on this machine and never downloads one: --xla-plugin FILE
(or $HACRL_XLA_PLUGIN), else pip's jax-cuda13-pjrt / jax-cuda12-pjrt
(xla:cuda) or lammps-jax-pjrt-cpu (xla:cpu, scripts/xla-cpu-plugin.sh); a
missing plugin is an error that lists every place looked at.

Shell completion (commands, flags, benchmark and split names, backends,
config files, checkpoint directories, a run's metric keys): hacrl completion
bash|zsh|fish|powershell prints the script; for example, in ~/.bashrc:
  source <(hacrl completion bash)
(hacrl completion bash --help says how to install it for every session.)

Exit status:
  0    success (verify: equal)
  1    failure (verify: not equal; verify --jsonl, score: a bad line; any error)
  2    usage error: unknown command or flag, wrong arguments, bad flag value
  130  interrupted (SIGINT/SIGTERM; train saves a checkpoint first)`

// rootCmd builds the command tree with hacrl's usage errors: flag and
// argument errors of every command are usageErr.
func rootCmd() *cobra.Command {
	var data, xlaPlugin string
	root := &cobra.Command{
		Use:           "hacrl",
		Short:         "Heterogeneous Agent Collaborative Reinforcement Learning",
		Long:          rootLong,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionText(),
		PersistentPreRunE: func(*cobra.Command, []string) error {
			if xlaPlugin != "" {
				abs, err := filepath.Abs(xlaPlugin)
				if err != nil {
					return usage("--xla-plugin %s: %v", xlaPlugin, err)
				}
				if st, err := os.Stat(abs); err != nil || !st.Mode().IsRegular() {
					return usage("--xla-plugin %s: not a file (want a PJRT plugin .so, such as jax-cuda13-pjrt's xla_cuda_plugin.so)", xlaPlugin)
				}
				// The variable carries the choice to the processes a command starts.
				if err := os.Setenv(backend.XLAPluginEnv, abs); err != nil {
					return err
				}
			}
			if data == "" {
				return nil
			}
			abs, err := filepath.Abs(data)
			if err != nil {
				return usage("--data %s: %v", data, err)
			}
			if st, err := os.Stat(abs); err != nil || !st.IsDir() {
				return usage("--data %s: not a directory", data)
			}
			// The variable carries the choice to the processes a command
			// starts (hacrl experiment's cells).
			return os.Setenv(shared.DataEnv, abs)
		},
	}
	root.PersistentFlags().StringVar(&xlaPlugin, "xla-plugin", "", "the PJRT plugin file the XLA backend loads (builds with -tags xla; default: $"+backend.XLAPluginEnv+", else found locally, see the README's GPU section)")
	root.PersistentFlags().StringVar(&data, "data", "", "shared data directory, holding benchmarks/ and train/ (default: see hacrl help)")
	root.AddCommand(trainCmd(), sftCmd(), evalCmd(), benchCmd(), tokenizerCmd(), verifyCmd(), plotCmd(), experimentCmd(), rolloutsCmd(),
		generateCmd(), scoreCmd(), promptCmd(), mergeCmd(), serveCmd(), agentCmd(), busCmd(), viewCmd())
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr{err.Error()} })
	usageErrors(root)
	completions(root)
	root.SetVersionTemplate(versionTemplate(root.Version))
	return root
}

// usageErrors makes the argument errors of c and its subcommands usageErr,
// and makes a command that only groups others (hacrl, hacrl bench) refuse an
// unknown subcommand.
func usageErrors(c *cobra.Command) {
	if !c.Runnable() && c.HasSubCommands() {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(s, ", "))
			}
			return usageErr{msg}
		}
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	} else if args := c.Args; args != nil {
		c.Args = func(cmd *cobra.Command, a []string) error {
			if err := args(cmd, a); err != nil {
				return usageErr{err.Error()}
			}
			return nil
		}
	}
	for _, s := range c.Commands() {
		usageErrors(s)
	}
}

// positionalNumbers returns args with the arguments that look like negative
// numbers or signed math ("-3", "-.5", "-\frac{1}{2}": a '-' followed by
// anything but a letter or '-') kept as positional arguments, which the flag
// parser would take for shorthand flags. When there is one, the command's
// positional arguments move, in order, behind a "--"; its flags and their
// values stay in front.
func positionalNumbers(root *cobra.Command, args []string) []string {
	cmd, rest, err := root.Find(args)
	if err != nil || cmd.DisableFlagParsing {
		return args
	}
	lookup := func(name string) *pflag.Flag {
		if f := cmd.Flags().Lookup(name); f != nil {
			return f
		}
		return cmd.InheritedFlags().Lookup(name)
	}
	short := func(c byte) *pflag.Flag {
		if f := cmd.Flags().ShorthandLookup(string(c)); f != nil {
			return f
		}
		return cmd.InheritedFlags().ShorthandLookup(string(c))
	}
	var flags, positional []string
	signed := false
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case a == "--":
			positional = append(positional, rest[i+1:]...)
			i = len(rest)
		case strings.HasPrefix(a, "--"):
			flags = append(flags, a)
			if f := lookup(a[2:]); !strings.Contains(a, "=") && f != nil && f.NoOptDefVal == "" && i+1 < len(rest) {
				flags = append(flags, rest[i+1])
				i++
			}
		case len(a) > 1 && a[0] == '-' && !isLetter(a[1]) && short(a[1]) == nil:
			positional = append(positional, a)
			signed = true
		case len(a) > 1 && a[0] == '-':
			flags = append(flags, a)
			// -abc: the first flag that takes a value takes the rest of
			// the word, or the next argument when it ends the word.
			for j := 1; j < len(a); j++ {
				if f := short(a[j]); f != nil && f.NoOptDefVal == "" {
					if j == len(a)-1 && i+1 < len(rest) {
						flags = append(flags, rest[i+1])
						i++
					}
					break
				}
			}
		default:
			positional = append(positional, a)
		}
	}
	if !signed {
		return args
	}
	var path []string
	for c := cmd; c.HasParent(); c = c.Parent() {
		path = append([]string{c.Name()}, path...)
	}
	out := append(path, flags...)
	out = append(out, "--")
	return append(out, positional...)
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// exitCode is an error that asks for a specific exit status.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }
