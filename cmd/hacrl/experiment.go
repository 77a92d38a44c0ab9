package main

import (
	"fmt"
	"time"

	"github.com/hacrl/hacrl/experiment"
	"github.com/spf13/cobra"
)

func experimentCmd() *cobra.Command {
	var parallel int
	var reportOnly bool
	var out, archive string
	cmd := &cobra.Command{
		Use:   "experiment CONFIG",
		Short: "Run a grid of settings × methods × seeds (+ ablations) and write the report",
		Long: `Run every cell of an experiment grid — each heterogeneity setting with each
method (default GRPO, GSPO, GSPO×2, Naive, HACPO) and each seed, then the
ablation variants on one setting — as hacrl train runs in OUT/cells, one after
another or --parallel at a time. A half-finished grid resumes where it
stopped. At the end it writes OUT/results.json, OUT/report.md (Table 1 per
setting, claims paired by seed with 95% intervals, ablation tables, rollout
cost, per-step diagnostics and how they move over the run) and learning
curves in OUT/plots. --report-only rebuilds the report from finished cells.

--archive DIR copies what the report needs of every finished cell (its
done.json, cell.yaml and gzipped metrics, without weights) into DIR, laid
out like OUT, and writes the report there too: a whole grid's record in a
few megabytes, to keep beside the report. With --out DIR the report is
rebuilt from such an archive (--report-only), or the grid goes on there,
training only the cells it lacks.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			onInterrupt("stopping; each running cell finishes its step and saves a checkpoint, and the grid resumes from there")
			c, err := experiment.Load(args[0])
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("parallel") {
				c.Parallel = parallel
			}
			if out != "" {
				c.Out = out
			}
			t0 := time.Now()
			if !reportOnly {
				r := &experiment.Runner{Log: cmd.ErrOrStderr()}
				if err := r.Run(cmd.Context(), c); err != nil {
					return err
				}
			}
			results, err := experiment.Collect(c, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if archive != "" {
				n, err := experiment.Archive(c, archive)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "archived %d finished cells of %d in %s\n", n, len(c.Cells()), archive)
				// The archive carries its report, as --out ARCHIVE --report-only rebuilds it.
				ac := *c
				ac.Out = archive
				if _, err := experiment.Report(cmd.Context(), &ac, results); err != nil {
					return err
				}
			}
			md, err := experiment.Report(cmd.Context(), c, results)
			if err != nil {
				return err
			}
			fmt.Print(md)
			fmt.Fprintf(cmd.ErrOrStderr(), "report: %s/report.md · results: %s/results.json · wall time %s\n", c.Out, c.Out, time.Since(t0).Round(time.Second))
			return nil
		},
	}
	cmd.Flags().IntVar(&parallel, "parallel", 1, "cells trained at once (separate processes)")
	cmd.Flags().BoolVar(&reportOnly, "report-only", false, "only rebuild the report from finished cells")
	cmd.Flags().StringVar(&out, "out", "", "the grid's directory (default: the config's out)")
	cmd.Flags().StringVar(&archive, "archive", "", "copy every finished cell's done.json, cell.yaml and gzipped metrics into this directory")
	return cmd
}
