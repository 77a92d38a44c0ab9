package kernel

import (
	"math"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/cpu"
)

// MeasurePeaks reports one positive, finite rate per vector instruction set
// the CPU has, with the thread count it ran on.
func TestMeasurePeaks(t *testing.T) {
	var want []string
	if runtime.GOARCH == "amd64" {
		if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
			want = append(want, "avx2-fma")
		}
		if cpu.X86.HasAVX512F {
			want = append(want, "avx512-fma")
		}
	}
	if runtime.GOARCH == "arm64" {
		want = append(want, "neon-fma")
	}
	peaks := MeasurePeaks(2, 20*time.Millisecond)
	if len(peaks) != len(want) {
		t.Fatalf("MeasurePeaks = %+v, want one per instruction set of %v", peaks, want)
	}
	for i, p := range peaks {
		if p.ISA != want[i] || p.Threads != 2 || !(p.GFLOPS > 0) || math.IsInf(p.GFLOPS, 0) {
			t.Errorf("peak %d = %+v, want %s on 2 threads at a positive finite rate", i, p, want[i])
		}
	}
}
