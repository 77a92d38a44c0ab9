package kernel

import "golang.org/x/sys/cpu"

// The loops of peak_amd64.s keep twelve independent sums in registers, so
// that two multiply-add units of latency 4–5 cycles stay busy.
func init() {
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		peakLoops = append(peakLoops, peakLoop{"avx2-fma", 12 * 8 * 2, fmaLoopAVX2})
	}
	if cpu.X86.HasAVX512F {
		peakLoops = append(peakLoops, peakLoop{"avx512-fma", 12 * 16 * 2, fmaLoopAVX512})
	}
}

// fmaLoopAVX2 runs n iterations of twelve 8-lane VFMADD231PS.
func fmaLoopAVX2(n int)

// fmaLoopAVX512 runs n iterations of twelve 16-lane VFMADD231PS.
func fmaLoopAVX512(n int)
