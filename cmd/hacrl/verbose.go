package main

import "github.com/spf13/pflag"

// registerVerbose adds --verbose, which train and agent share: without a
// terminal, a line per phase of every agent's step as well as the line per
// step (a terminal's live block shows the phases anyway).
func registerVerbose(f *pflag.FlagSet, verbose *bool) {
	f.BoolVar(verbose, "verbose", false, "without a terminal, log every phase (sample, reward, score, update, …) of every agent's step, not only a line per step")
}
