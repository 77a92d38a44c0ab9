// Package timebox bounds how long a fuzz target spends on one input: an
// input that makes a parser hang or allocate for minutes is a finding too,
// which the fuzzer would otherwise only show as a stalled worker.
package timebox

import (
	"testing"
	"time"
)

// Run runs fn and fails t when it takes longer than d. A panic in fn is
// raised again in the caller's goroutine, where the fuzzer records it.
func Run(t testing.TB, d time.Duration, fn func()) {
	t.Helper()
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		fn()
	}()
	select {
	case p := <-done:
		if p != nil {
			panic(p)
		}
	case <-time.After(d):
		t.Fatalf("took more than %v", d)
	}
}
