//go:build unix

package main

import (
	"runtime"
	"syscall"
)

// peakRSSMB is the process's peak resident memory so far in MiB (getrusage's
// ru_maxrss: KiB on Linux and the BSDs, bytes on macOS), or -1 when the
// system does not say.
func peakRSSMB() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		return float64(ru.Maxrss) / (1 << 20)
	}
	return float64(ru.Maxrss) / (1 << 10)
}
