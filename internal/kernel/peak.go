package kernel

import (
	"runtime"
	"sync"
	"time"
)

// A Peak is the rate at which this CPU retires float32 fused
// multiply-adds of one vector instruction set, measured by a loop of
// independent multiply-adds on registers only: no memory traffic, no
// dependency stalls, so no kernel can run faster. Kernels are judged as a
// fraction of it.
type Peak struct {
	ISA     string  // the instructions: "avx2-fma" (8 lanes), "avx512-fma" (16 lanes), "neon-fma" (4 lanes, arm64)
	Threads int     // goroutines that ran the loop at once, each on its own OS thread
	GFLOPS  float64 // 10⁹ floating-point operations per second, 2 per lane and multiply-add
}

// peakLoop is one instruction set's loop: run(n) executes n iterations of
// flopsPerIter floating-point operations.
type peakLoop struct {
	isa          string
	flopsPerIter int
	run          func(n int)
}

// peakLoops lists the loops this CPU can run (peak_amd64.go, peak_arm64.go).
var peakLoops []peakLoop

// MeasurePeaks measures the peak of every vector instruction set this CPU
// has (none on CPUs without one the package knows), with threads
// goroutines running the loop at the same time: the best of three runs of
// about d each.
func MeasurePeaks(threads int, d time.Duration) []Peak {
	var peaks []Peak
	for _, l := range peakLoops {
		// Calibrate the iteration count on one thread, then time all.
		n := 1 << 16
		for {
			start := time.Now()
			l.run(n)
			if el := time.Since(start); el > d/8 || n >= 1<<30 {
				n = int(float64(n) * float64(d) / float64(max(el, time.Microsecond)))
				break
			}
			n *= 4
		}
		n = max(n, 1)
		best := 0.0
		for range 3 {
			var wg sync.WaitGroup
			start := time.Now()
			for range threads {
				wg.Add(1)
				go func() {
					defer wg.Done()
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					l.run(n)
				}()
			}
			wg.Wait()
			el := time.Since(start).Seconds()
			best = max(best, float64(threads)*float64(n)*float64(l.flopsPerIter)/el/1e9)
		}
		peaks = append(peaks, Peak{ISA: l.isa, Threads: threads, GFLOPS: best})
	}
	return peaks
}
