// Command hacrl trains several heterogeneous language models together with
// collaborative RL (HACPO), evaluates them, and provides the tools around it:
// supervised warm start, tokenizer training, answer verification, plots and
// engine benchmarks. Run `hacrl help` for the commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		fmt.Fprintln(os.Stderr, "\ninterrupt: finishing the current step and saving a checkpoint (interrupt again to abort)")
		cancel()
		<-sigs
		fmt.Fprintln(os.Stderr, "aborted")
		os.Exit(130)
	}()
	root := &cobra.Command{
		Use:           "hacrl",
		Short:         "Heterogeneous Agent Collaborative Reinforcement Learning",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(trainCmd(), sftCmd(), evalCmd(), benchCmd(), tokenizerCmd(), verifyCmd(), plotCmd(), experimentCmd())
	root.AddCommand(rolloutsCmd())
	if err := root.ExecuteContext(ctx); err != nil {
		var ec exitCode
		if errors.As(err, &ec) {
			os.Exit(int(ec)) // the command already said why
		}
		fmt.Fprintln(os.Stderr, "hacrl:", err)
		os.Exit(1)
	}
}

// exitCode is an error that asks for a specific exit status.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }
