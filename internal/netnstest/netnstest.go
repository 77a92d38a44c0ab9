//go:build linux

// Package netnstest gives tests separate network hosts on one Linux
// machine: network namespaces joined by veth pairs, whose links a test cuts
// and mends to stage a network fault between real processes.
//
// A Star is a hub host with leaf hosts around it, each joined to the hub
// by its own veth pair on its own subnet (leaf i: the hub is 10.77.i.1, the
// leaf 10.77.i.2), the loopback up in each. Cutting a leaf's link takes its
// veth pair down, so that every packet between the leaf and the hub is
// lost, as when a cable is pulled: TCP connections stay open and see no
// answer, new ones cannot be made. Processes run on a host through
// `ip netns exec`; they share the machine's files.
//
// Creating namespaces needs root (CAP_SYS_ADMIN) and ip(8): Require skips a
// test that has neither, saying which. The namespaces' names are unique per
// process and test (hacrl-PID-N-role); t.Cleanup removes them, with their
// veths, whether the test passed or failed, and each new Star first removes
// the namespaces of test processes that no longer exist (a test binary
// killed before its cleanup).
package netnstest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Require skips t unless it runs as root with ip(8) able to add a network
// namespace.
func Require(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root: run the test as root (CI does)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("network namespaces need ip(8) (iproute2), not found in $PATH")
	}
}

// Host is a network namespace.
type Host struct {
	NS string // the namespace's name, for ip netns exec
}

// Command is name run with args on host h (ip netns exec).
func (h *Host) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", h.NS, name}, args...)...)
}

// Leaf is a host joined to the hub by its own link.
type Leaf struct {
	Host
	Addr    string // the leaf's address
	HubAddr string // the hub's address on the leaf's link
	hub     *Host
	dev     string // the hub's end of the link
}

// Star is a hub host and leaves around it.
type Star struct {
	Hub    *Host
	Leaves map[string]*Leaf
}

var seq atomic.Int64

// leafDev is a leaf's end of its link.
const leafDev = "up0"

// NewStar creates a hub and one leaf per name, linked as the package
// comment says; t.Cleanup removes them.
func NewStar(t testing.TB, hub string, leaves ...string) *Star {
	t.Helper()
	Require(t)
	if len(leaves) > 250 {
		t.Fatalf("netnstest: %d leaves, at most 250", len(leaves))
	}
	sweep(t)
	prefix := fmt.Sprintf("hacrl-%d-%d-", os.Getpid(), seq.Add(1))
	s := &Star{Hub: addHost(t, prefix+hub), Leaves: map[string]*Leaf{}}
	for i, name := range leaves {
		if s.Leaves[name] != nil {
			t.Fatalf("netnstest: leaf %q named twice", name)
		}
		l := &Leaf{Host: *addHost(t, prefix+name), hub: s.Hub, dev: "v" + strconv.Itoa(i+1),
			HubAddr: fmt.Sprintf("10.77.%d.1", i+1), Addr: fmt.Sprintf("10.77.%d.2", i+1)}
		ip(t, "-n", s.Hub.NS, "link", "add", l.dev, "type", "veth", "peer", "name", leafDev, "netns", l.NS)
		ip(t, "-n", s.Hub.NS, "addr", "add", l.HubAddr+"/24", "dev", l.dev)
		ip(t, "-n", l.NS, "addr", "add", l.Addr+"/24", "dev", leafDev)
		ip(t, "-n", l.NS, "link", "set", leafDev, "up")
		ip(t, "-n", s.Hub.NS, "link", "set", l.dev, "up")
		l.waitUp(t)
		s.Leaves[name] = l
	}
	return s
}

// Cut takes the leaf's link down: nothing passes between it and the hub.
func (l *Leaf) Cut(t testing.TB) {
	t.Helper()
	ip(t, "-n", l.hub.NS, "link", "set", l.dev, "down")
}

// Mend brings the leaf's link up again, and returns once both ends say
// it is up.
func (l *Leaf) Mend(t testing.TB) {
	t.Helper()
	ip(t, "-n", l.hub.NS, "link", "set", l.dev, "up")
	l.waitUp(t)
}

// waitUp returns once both ends of the leaf's link say it is up.
func (l *Leaf) waitUp(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !isUp(l.hub.NS, l.dev) || !isUp(l.NS, leafDev) {
		if time.Now().After(deadline) {
			t.Fatalf("netnstest: the link of %s is not up after 10 s", l.NS)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// isUp says whether dev in namespace ns is up with a carrier.
func isUp(ns, dev string) bool {
	out, err := exec.Command("ip", "-n", ns, "-o", "link", "show", "dev", dev).Output()
	return err == nil && strings.Contains(string(out), "state UP")
}

// addHost adds namespace ns with its loopback up, removed in t.Cleanup.
func addHost(t testing.TB, ns string) *Host {
	t.Helper()
	ip(t, "netns", "add", ns)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			t.Errorf("netnstest: remove namespace %s: %v: %s", ns, err, bytes.TrimSpace(out))
		}
	})
	ip(t, "-n", ns, "link", "set", "lo", "up")
	return &Host{NS: ns}
}

// sweep removes the namespaces of test processes that are gone.
func sweep(t testing.TB) {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest, ok := strings.CutPrefix(name, "hacrl-")
		if !ok {
			continue
		}
		p, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(p)
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Logf("netnstest: remove stale namespace %s: %v: %s", name, err, bytes.TrimSpace(out))
		}
	}
}

func ip(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("netnstest: ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
}
