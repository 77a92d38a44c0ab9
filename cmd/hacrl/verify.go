package main

import (
	"bufio"
	"fmt"
	"os"

	"github.com/hacrl/hacrl/verify"
	"github.com/spf13/cobra"
)

func verifyCmd() *cobra.Command {
	var jsonl string
	cmd := &cobra.Command{
		Use:   "verify ANSWER REFERENCE | verify --jsonl FILE",
		Short: "Check a math answer against a reference (exit 0 equal, 1 not equal)",
		Long: `Check a model's answer against a reference answer with hacrl's math checker:
ANSWER may be a bare answer or a whole response, whose final answer is then
extracted (last \boxed{}, "the answer is", #### N, else the last number); the
answers are normalized and compared as numbers, fractions, expressions,
tuples, intervals, sets or matrices. Exit status 0 when equal, 1 when not,
2 on a usage error. A negative answer is an argument, not a flag:
hacrl verify -3 -3.

With --jsonl FILE (or - for standard input), every line {"answer": …,
"reference": …} is written back to standard output, in order, with
"equal": true|false added; a bad line is reported on standard error with its
line number and the others go on (exit status 1 if any line was bad).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if jsonl != "" {
				if len(args) != 0 {
					return usage("--jsonl takes no positional arguments, got %d", len(args))
				}
				in := cmd.InOrStdin()
				if jsonl != "-" {
					f, err := os.Open(jsonl)
					if err != nil {
						return err
					}
					defer f.Close()
					in = f
				}
				w := bufio.NewWriter(cmd.OutOrStdout())
				sum, err := verify.VerifyJSONL(cmd.Context(), in, w, cmd.ErrOrStderr())
				if ferr := w.Flush(); err == nil {
					err = ferr
				}
				if err != nil {
					return err
				}
				if sum.Bad > 0 {
					return exitCode(1)
				}
				return nil
			}
			if len(args) != 2 {
				return usage("want ANSWER REFERENCE, or --jsonl FILE; got %d arguments", len(args))
			}
			if verify.EqualAnswer(args[0], args[1]) {
				fmt.Fprintln(cmd.OutOrStdout(), "equal")
				return nil
			}
			fmt.Fprintln(cmd.OutOrStdout(), "not equal")
			return exitCode(1)
		},
	}
	cmd.Flags().StringVar(&jsonl, "jsonl", "", "check every line of a JSONL file (- for standard input)")
	return cmd
}
