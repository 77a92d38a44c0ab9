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
'eval/*'), or with --grid one figure of the headline metrics.`,
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
	f.BoolVar(&opts.Grid, "grid", false, "one grid figure of the headline metrics")
	f.StringSliceVar(&opts.Formats, "format", nil, "file formats (png, svg; default both)")
	f.StringVar(&opts.Dest, "dest", "", "output directory (default OUT/plots)")
	return cmd
}
