//go:build !unix

package main

// peakRSSMB is -1 where the peak resident memory is not read (see
// peakmem_unix.go).
func peakRSSMB() float64 { return -1 }
