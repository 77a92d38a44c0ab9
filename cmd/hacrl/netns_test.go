//go:build linux

package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hacrl/hacrl/internal/netnstest"
	"github.com/hacrl/hacrl/metrics"
)

// The agents on separate hosts: network namespaces (package netnstest), a
// hub with hacrl bus and one leaf per agent, each agent reaching the bus
// over its own veth link. The tests cut an agent's link while the run goes
// on, as a pulled cable or a lost route would.

// hostWait is the agents' --wait in these tests.
const hostWait = 6 * time.Second

// startOn starts hacrl with args on host h, its output read as it comes.
func startOn(t *testing.T, h *netnstest.Host, env []string, args ...string) *liveRun {
	t.Helper()
	return startCmd(t, h.Command(hacrlBin(t), args...), env)
}

// hostRun is a bus on a hub host and one leaf host per agent of the
// shortened main example.
type hostRun struct {
	star  *netnstest.Star
	token []string
	cfg   string
	out   string
}

var hostAgents = []string{"gpt-char", "llama-bpe"}

func newHostRun(t *testing.T) *hostRun {
	star := netnstest.NewStar(t, "bus", hostAgents...)
	dir := t.TempDir()
	h := &hostRun{star: star, token: []string{busTokenEnv + "=n3t"}, out: filepath.Join(dir, "hosts")}
	h.cfg = procConfig(t, h.out, "0.0001")
	b := startOn(t, star.Hub, h.token, "bus", "--store", filepath.Join(dir, "nats"), "--bus-listen", "0.0.0.0:4222")
	b.waitFor(t, time.Minute, "the bus", func(out string) bool { return strings.Contains(out, "interrupt to stop") })
	return h
}

// agent starts agent name on its host, joined to the bus over its link.
func (h *hostRun) agent(t *testing.T, name string, extra ...string) *liveRun {
	leaf := h.star.Leaves[name]
	args := append([]string{"agent", h.cfg, "--agent", name, "--bus", "nats://" + leaf.HubAddr + ":4222", "--wait", hostWait.String(), "--verbose"}, extra...)
	return startOn(t, &leaf.Host, h.token, args...)
}

// sameAsReference compares each agent's own metrics with its part of the
// single-process run's.
func (h *hostRun) sameAsReference(t *testing.T, want []metrics.Record) {
	t.Helper()
	for _, name := range hostAgents {
		got := stableMetrics(t, filepath.Join(h.out, "agents", name, "metrics.jsonl"))
		sameMetrics(t, name, metrics.OfAgent(got, name), metrics.OfAgent(want, name))
	}
}

// TestHostsRideOutShortCut: the link of one agent's host is cut for less
// than --wait in the middle of the run; both agents pause and finish with
// the single-process run's metrics.
func TestHostsRideOutShortCut(t *testing.T) {
	netnstest.Require(t)
	want := reference(t)
	h := newHostRun(t)
	agents := []*liveRun{h.agent(t, "gpt-char"), h.agent(t, "llama-bpe")}
	agents[0].waitFor(t, 2*time.Minute, "step 2", func(out string) bool { return strings.Contains(out, "step 2/4") })
	leaf := h.star.Leaves["gpt-char"]
	leaf.Cut(t)
	time.Sleep(hostWait / 4)
	leaf.Mend(t)
	for i, l := range agents {
		if err := l.wait(t, 2*time.Minute); err != nil {
			t.Fatalf("%s after a cut of %v (--wait %v): %v\n%s", hostAgents[i], hostWait/4, hostWait, err, l.String())
		}
	}
	h.sameAsReference(t, want)
}

// TestHostsStopOnLongCut: the link of one agent's host is cut for longer
// than --wait, while it samples (its next wait: publishing its rollouts)
// and while it evaluates (its next wait: recording, after its checkpoint,
// the steps it still needs). Both agents stop within --wait (and the step
// they were computing) of the cut: the cut-off one naming the bus it could
// not reach, the other naming the agent it waited for; while they wait,
// their status says so. With the link back, --resume finishes the run with
// the single-process run's metrics.
func TestHostsStopOnLongCut(t *testing.T) {
	netnstest.Require(t)
	want := reference(t)
	for _, at := range []string{"sample", "eval"} {
		t.Run("while gpt-char is at "+at, func(t *testing.T) {
			longCut(t, want, "step 2/4 gpt-char: "+at)
		})
	}
}

// longCut cuts gpt-char's link once its output says when, for longer
// than --wait, and resumes the run once both agents stopped.
func longCut(t *testing.T, want []metrics.Record, when string) {
	h := newHostRun(t)
	agents := []*liveRun{h.agent(t, "gpt-char"), h.agent(t, "llama-bpe")}
	agents[0].waitFor(t, 2*time.Minute, when, func(out string) bool { return strings.Contains(out, when) })
	leaf := h.star.Leaves["gpt-char"]
	leaf.Cut(t)
	cut := time.Now()
	// The waits begin once the step in progress is computed: a step of this
	// run takes about a second; a loaded machine may take a few.
	const margin = 5 * time.Second
	type stop struct {
		err error
		at  time.Time
	}
	stops := make([]chan stop, len(agents))
	for i, l := range agents {
		stops[i] = make(chan stop, 1)
		go func() {
			err := <-l.done
			at := time.Now()
			l.done <- err
			stops[i] <- stop{err, at}
		}()
	}
	for i, l := range agents {
		var st stop
		select {
		case st = <-stops[i]:
		case <-time.After(hostWait + margin + time.Minute):
			t.Fatalf("%s still runs %v after the cut (--wait %v)\n%s", hostAgents[i], time.Since(cut).Round(time.Second), hostWait, l.String())
		}
		took := st.at.Sub(cut)
		if st.err == nil {
			t.Fatalf("%s finished the run with its host cut off:\n%s", hostAgents[i], l.String())
		}
		if took > hostWait+margin {
			t.Errorf("%s stopped %v after the cut; want within --wait %v + %v", hostAgents[i], took.Round(time.Millisecond), hostWait, margin)
		}
		t.Logf("%s stopped %v after the cut (--wait %v)", hostAgents[i], took.Round(time.Millisecond), hostWait)
	}
	leaf.Mend(t)
	cutOff, other := agents[0].String(), agents[1].String()
	url := regexp.QuoteMeta("nats://" + leaf.HubAddr + ":4222")
	checks := []struct {
		who, out string
		want     string // a regular expression
	}{
		{"gpt-char: status", cutOff, `gpt-char: waiting for (the bus \(` + url + `\)|the rollouts of llama-bpe at step \d) since \d+ s`},
		{"gpt-char: error", cutOff, `waited [\d.]+m?s for the bus at ` + url + ` to |this agent could not read from the bus`},
		{"gpt-char: advice", cutOff, `start this agent again with --resume`},
		{"llama-bpe: status", other, `llama-bpe: waiting for the rollouts of gpt-char at step \d since \d+ s`},
		{"llama-bpe: error", other, `waited ` + hostWait.String() + ` \(--wait\) for the rollouts of gpt-char at step \d: gpt-char \(last heard of \d+s ago: its process is gone or cut off\)`},
	}
	for _, c := range checks {
		if !regexp.MustCompile(c.want).MatchString(c.out) {
			t.Errorf("%s: the output does not match %s:\n%s", c.who, c.want, c.out)
		}
	}

	agents = []*liveRun{h.agent(t, "gpt-char", "--resume"), h.agent(t, "llama-bpe", "--resume")}
	for i, l := range agents {
		if err := l.wait(t, 2*time.Minute); err != nil {
			t.Fatalf("%s --resume with the link back: %v\n%s", hostAgents[i], err, l.String())
		}
	}
	h.sameAsReference(t, want)
}
