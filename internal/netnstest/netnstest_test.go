//go:build linux

package netnstest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// helperEnv makes the test binary a helper on a host: "serve ADDR" answers
// every connection with a line, "dial ADDR" prints the line it reads.
const helperEnv = "NETNSTEST_HELPER"

func TestMain(m *testing.M) {
	if h := os.Getenv(helperEnv); h != "" {
		os.Exit(helper(h))
	}
	os.Exit(m.Run())
}

func helper(h string) int {
	verb, addr, _ := strings.Cut(h, " ")
	switch verb {
	case "serve":
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println("ready")
		for {
			c, err := ln.Accept()
			if err != nil {
				return 1
			}
			fmt.Fprintf(c, "hello from %s\n", c.LocalAddr())
			c.Close()
		}
	case "dial":
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		c.SetDeadline(time.Now().Add(time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Print(line)
		return 0
	}
	return 2
}

// on runs the test binary as helper h on host.
func on(host *Host, h string) *exec.Cmd {
	c := host.Command(os.Args[0], "-test.run=^$")
	c.Env = append(os.Environ(), helperEnv+"="+h)
	return c
}

// TestStar: each leaf reaches the hub over its own link, and no other
// address; a cut link passes nothing until mended, and leaves the other
// links as they were; the namespaces are gone after the test's cleanup.
func TestStar(t *testing.T) {
	Require(t)
	var names []string
	t.Run("links", func(t *testing.T) {
		s := NewStar(t, "hub", "a", "b")
		names = []string{s.Hub.NS, s.Leaves["a"].NS, s.Leaves["b"].NS}
		srv := on(s.Hub, "serve 0.0.0.0:7000")
		out, err := srv.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
		if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
			t.Fatalf("hub server: %q, %v", line, err)
		}
		a, b := s.Leaves["a"], s.Leaves["b"]
		steps := []struct {
			name string
			do   func(t testing.TB)
			from *Leaf
			to   string
			ok   bool
		}{
			{"a reaches the hub", nil, a, a.HubAddr, true},
			{"b reaches the hub", nil, b, b.HubAddr, true},
			{"a has no route over b's link", nil, a, b.HubAddr, false},
			{"a cut off", a.Cut, a, a.HubAddr, false},
			{"b while a is cut off", nil, b, b.HubAddr, true},
			{"a mended", a.Mend, a, a.HubAddr, true},
		}
		for _, st := range steps {
			if st.do != nil {
				st.do(t)
			}
			got, err := on(&st.from.Host, "dial "+st.to+":7000").CombinedOutput()
			if ok := err == nil; ok != st.ok {
				t.Fatalf("%s: dial %s: %q, %v; want success %v", st.name, st.to, got, err, st.ok)
			}
			if st.ok && string(got) != "hello from "+st.to+":7000\n" {
				t.Fatalf("%s: read %q", st.name, got)
			}
		}
	})
	list, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.Contains(string(list), n) {
			t.Errorf("namespace %s is left after the test", n)
		}
	}
}
