package runlock

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

// helperEnv makes the test binary a lock holder (see TestHelperHolder).
const helperEnv = "RUNLOCK_TEST_HOLD"

// TestHelperHolder is not a test: run with helperEnv=DIR, it takes the lock on
// DIR, says "locked" and waits to be killed.
func TestHelperHolder(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		t.Skip("helper process only")
	}
	if _, err := Acquire(dir); err != nil {
		os.Stdout.WriteString("error: " + err.Error() + "\n")
		os.Exit(3)
	}
	os.Stdout.WriteString("locked\n")
	time.Sleep(time.Minute)
	os.Exit(4)
}

func TestSecondAcquireRefusedUntilRelease(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	if l.Stale != nil {
		t.Errorf("fresh lock reports a stale holder %v", l.Stale)
	}
	_, err = Acquire(dir)
	var held *HeldError
	if !errors.As(err, &held) {
		t.Fatalf("second Acquire: %v, want a HeldError", err)
	}
	host, _ := os.Hostname()
	if held.Holder == nil || held.Holder.PID != os.Getpid() || held.Holder.Host != host || len(held.Holder.Command) == 0 {
		t.Fatalf("holder %+v, want this process (pid %d, host %s)", held.Holder, os.Getpid(), host)
	}
	for _, want := range []string{dir, "in use", "pid ", host, "started ", FileName} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Errorf("second Release: %v", err)
	}
	l2, err := Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	defer l2.Release()
	if l2.Stale != nil {
		t.Errorf("a released lock is reported stale: %v", l2.Stale)
	}
}

func TestMissingDirectory(t *testing.T) {
	if _, err := Acquire(t.TempDir() + "/no/such"); err == nil || !strings.Contains(err.Error(), "no/such") {
		t.Fatalf("Acquire in a missing directory: %v", err)
	}
}

// TestKilledHolder: a holder killed with SIGKILL is named while it lives and
// its lock is taken over, and reported stale, once it is dead.
func TestKilledHolder(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skip("needs SIGKILL and an advisory lock")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHolder$")
	cmd.Env = append(os.Environ(), helperEnv+"="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("helper said %q (%v)", line, err)
	}
	_, err = Acquire(dir)
	var held *HeldError
	if !errors.As(err, &held) || held.Holder == nil || held.Holder.PID != cmd.Process.Pid {
		t.Fatalf("Acquire while the helper (pid %d) holds the lock: %v", cmd.Process.Pid, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	l, err := Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire after the holder was killed: %v", err)
	}
	defer l.Release()
	if l.Stale == nil || l.Stale.PID != cmd.Process.Pid {
		t.Errorf("stale holder %v, want pid %d", l.Stale, cmd.Process.Pid)
	}
}
