package main

import (
	"fmt"

	"github.com/hacrl/hacrl/plot"
	"github.com/spf13/cobra"
)

func plotCmd() *cobra.Command {
	var opts plot.Options
	cmd := &cobra.Command{
		Use:   "plot OUT",
		Short: "Draw a run's learning curves per agent (PNG and SVG)",
		Long: `Draw learning curves from OUT/metrics.jsonl, one line per agent, into
OUT/plots: one figure per metric (--metrics takes glob patterns such as
'eval/*'), or with --grid one figure of the headline metrics, or of the
--metrics selection. Prints the paths it wrote, one a line.

File names come from what is drawn, so different figures never share a
file: a metric's figure is named after its key (eval/test/greedy_acc:
eval_test_greedy_acc.png), the headline grid grid.png, the grid of a
selection after its patterns (--grid --metrics 'eval/*': grid-eval_all.png).
Drawing the same again (a run that went on) replaces the earlier files of
that figure, and says so on stderr.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Warn = cmd.ErrOrStderr()
			paths, err := plot.LearningCurves(cmd.Context(), args[0], opts)
			if err != nil {
				return err
			}
			for _, p := range paths {
				fmt.Fprintln(cmd.OutOrStdout(), p)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&opts.Metrics, "metrics", nil, "metric key patterns ('*' matches anything), comma-separated")
	f.BoolVar(&opts.Grid, "grid", false, "one grid figure: the headline metrics, or the --metrics selection")
	f.StringSliceVar(&opts.Formats, "format", nil, "file formats (png, svg; default both)")
	f.StringVar(&opts.Dest, "dest", "", "output directory (default OUT/plots)")
	return cmd
}
