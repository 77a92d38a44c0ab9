package kernel

// The loop of peak_arm64.s keeps 24 independent sums in registers, so that
// up to four multiply-add units of latency 4 cycles (Apple's, Neoverse
// V1/V2's) stay busy.
func init() {
	peakLoops = append(peakLoops, peakLoop{"neon-fma", 24 * 4 * 2, fmaLoopNEON})
}

// fmaLoopNEON runs n iterations of twenty-four 4-lane FMLA.
func fmaLoopNEON(n int)
