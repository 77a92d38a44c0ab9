package main

import (
	"fmt"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/train"
	"github.com/spf13/cobra"
)

func sftCmd() *cobra.Command {
	var out string
	var steps, evalProblems int
	var sets []string
	cmd := &cobra.Command{
		Use:   "sft CONFIG",
		Short: "Supervised warm start of one agent on a task's worked solutions or a dataset",
		Long: `Train one agent from scratch or from a checkpoint by cross-entropy on the
worked solutions of a task (or a dataset's answers), and save it as a checkpoint
directory (config.json, model.safetensors, tokenizer.json, agent.json) that a
train config names as an agent's checkpoint. examples/sft/ has the configs of
the example agents; they write to runs/sft/<name>, and --out
examples/agents/<name> replaces a shipped agent deliberately.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			onInterrupt("stopping; sft saves its model only when it finishes")
			parsed, err := overrideSets(cmd.Flags(), sets, []flagKey{{"out", "out", out}, {"steps", "steps", steps}, {"eval-problems", "eval.problems", evalProblems}})
			if err != nil {
				return err
			}
			cfg, err := config.LoadSFT(args[0], parsed...)
			if err != nil {
				return err
			}
			res, err := train.SFT(cmd.Context(), cfg, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			fmt.Printf("saved %s: %d steps, loss %.4f", cfg.Out, res.Steps, res.FinalLoss)
			if res.Accuracy >= 0 {
				fmt.Printf(", test greedy accuracy %.3f", res.Accuracy)
			}
			fmt.Printf(" (%s)\n", res.Elapsed.Round(1e9))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "checkpoint directory (overrides the config)")
	cmd.Flags().IntVar(&steps, "steps", 0, "training steps (overrides the config)")
	cmd.Flags().IntVar(&evalProblems, "eval-problems", 0, "test problems of the greedy evaluation (overrides eval.problems)")
	cmd.Flags().StringArrayVar(&sets, "set", nil, "override a config key, KEY=VALUE: KEY a path such as optimizer.lr, VALUE YAML (repeatable; as in hacrl train)")
	return cmd
}
