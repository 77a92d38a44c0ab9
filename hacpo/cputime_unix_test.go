//go:build unix

package hacpo

import (
	"syscall"
	"testing"
	"time"
)

// processCPU is the process's user + system CPU time. The benchmarks report it per
// operation ("cpu-ns/op") next to wall time, because a shared machine inflates the
// wall time of a single-threaded loop.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU starts CPU accounting; call the returned function after the loop.
func reportCPU(b *testing.B) func() {
	start := processCPU()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
		}
	}
}
