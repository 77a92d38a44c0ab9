// Package mounttest gives tests file systems that fail the way real storage
// does: a small tmpfs that fills up, and a read-only view of a directory.
// Mounting needs root (CI runs the suite as root); elsewhere the tests that
// need it are skipped, saying why.
//go:build linux

package mounttest

import (
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// Small mounts a tmpfs of size bytes for the test and returns its path; it
// is unmounted when the test ends.
func Small(t testing.TB, size int) string {
	t.Helper()
	needRoot(t)
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Fatalf("mount a tmpfs of %d bytes: %v", size, err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// ReadOnly mounts dir read-only at a new path for the test (a bind mount)
// and returns that path; it is unmounted when the test ends.
func ReadOnly(t testing.TB, dir string) string {
	t.Helper()
	needRoot(t)
	view := t.TempDir()
	if err := unix.Mount(dir, view, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind %s: %v", dir, err)
	}
	t.Cleanup(func() { unix.Unmount(view, unix.MNT_DETACH) })
	if err := unix.Mount("", view, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount %s read-only: %v", view, err)
	}
	return view
}

func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a file system for the test needs root (CI runs the suite as root)")
	}
}
