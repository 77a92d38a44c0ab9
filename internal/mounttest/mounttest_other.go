//go:build !linux

package mounttest

import "testing"

// Small skips the test: the mounts it needs are Linux's.
func Small(t testing.TB, size int) string {
	t.Helper()
	t.Skip("a small tmpfs for the test needs Linux (and root)")
	return ""
}

// ReadOnly skips the test: the mounts it needs are Linux's.
func ReadOnly(t testing.TB, dir string) string {
	t.Helper()
	t.Skip("a read-only bind mount for the test needs Linux (and root)")
	return ""
}
