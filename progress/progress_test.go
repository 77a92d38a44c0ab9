package progress

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPlainLines: without a terminal a step is one line (its time, the ETA
// at the mean step time, the summary) and a message one line; the phases
// are lines only with Verbose.
func TestPlainLines(t *testing.T) {
	steps := []string{
		"step 1/10  2.0s  ETA 18s  a acc 0.5", // 9 steps left at 2 s
		"step 2/10  4.0s  ETA 24s  a acc 0.6", // 8 left at the mean of 2 s and 4 s
		"resumed",
	}
	phases := []string{"step 1/10 a: sample", "step 1/10 b: update"}
	for _, verbose := range []bool{false, true} {
		var buf bytes.Buffer
		d := New(&buf, []string{"a", "b"}, 10)
		d.Verbose = verbose
		if d.live {
			t.Fatal("a bytes.Buffer is not a terminal")
		}
		d.Phase(1, "a", "sample")
		d.Phase(1, "b", "update")
		d.Step(1, 10, 2*time.Second, map[string]string{"a": "acc 0.5"})
		d.Step(2, 10, 4*time.Second, map[string]string{"a": "acc 0.6"})
		d.Log("resumed")
		want := steps
		if verbose {
			want = append(slices.Clone(phases), steps...)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
			got = append(got, l[len("15:04:05 "):])
		}
		if !slices.Equal(got, want) {
			t.Errorf("verbose %v: lines\n%s\nwant\n%s", verbose, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// TestWaitLines: a wait shows as a plain line when it starts, when what it
// waits for changes and every plainEvery while it lasts, and its end says
// how long it took; on a terminal it is a line under the agent's, gone
// when the wait ends.
func TestWaitLines(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	type call struct {
		at           time.Duration // since t0
		what, detail string        // Wait; "" for Waited
	}
	tests := []struct {
		name  string
		live  bool
		calls []call
		want  []string // lines written, in order (without the time)
	}{
		{"plain: start, repeat, change, end", false, []call{
			{time.Second, "the rollouts of b, c at step 3", ""},
			{2 * time.Second, "the rollouts of b, c at step 3", ""}, // nothing new to say
			{6 * time.Second, "the rollouts of b, c at step 3", ""},
			{7 * time.Second, "the rollouts of c at step 3", ""},
			{8 * time.Second, "the bus (nats://10.1.1.1:4222)", "collect step 3"},
			{12 * time.Second, "", ""},
		}, []string{
			"step 3/10 a: waiting for the rollouts of b, c at step 3 since 1 s",
			"step 3/10 a: waiting for the rollouts of b, c at step 3 since 6 s",
			"step 3/10 a: waiting for the rollouts of c at step 3 since 7 s",
			"step 3/10 a: waiting for the bus (nats://10.1.1.1:4222) since 8 s: collect step 3",
			"step 3/10 a: waited 12 s for the bus (nats://10.1.1.1:4222)",
		}},
		{"plain: an end without a wait says nothing", false, []call{{0, "", ""}}, nil},
		{"live: a line under the agent's, until the wait ends", true, []call{
			{time.Second, "the bus (nats://h:4222)", "publish step 3"},
			{8 * time.Second, "the bus (nats://h:4222)", "publish step 3"},
			{9 * time.Second, "", ""},
		}, []string{
			"    waiting for the bus (nats://h:4222) since 1 s: publish step 3",
			"    waiting for the bus (nats://h:4222) since 8 s: publish step 3",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			d := New(&buf, []string{"a", "b"}, 10)
			d.live = tt.live
			d.step = 3
			now := t0
			d.now = func() time.Time { return now }
			for _, c := range tt.calls {
				now = t0.Add(c.at)
				if c.what == "" {
					d.Waited("a")
				} else {
					d.Wait("a", c.what, c.detail, t0) // the wait began at t0
				}
			}
			var got []string
			for _, l := range strings.Split(buf.String(), "\n") {
				if tt.live {
					if strings.Contains(l, "waiting for") {
						got = append(got, l[strings.Index(l, "    waiting"):])
					}
				} else if l != "" {
					got = append(got, strings.TrimPrefix(l, l[:len("03:00:00 ")]))
				}
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			if tt.live {
				// The last redraw, after the wait ended: the agent's line alone.
				last := buf.String()[strings.LastIndex(buf.String(), "step 3/10"):]
				if strings.Contains(last, "waiting for") {
					t.Errorf("the block after the wait still shows it:\n%q", last)
				}
			}
		})
	}
}

// TestLiveStep: on a terminal the step's numbers go under each agent's
// line, the run line keeps the step, its time and the ETA, and no line of
// the block is wider than the terminal, so that a redraw erases it all.
func TestLiveStep(t *testing.T) {
	for _, cols := range []int{0, 30} {
		var buf bytes.Buffer
		d := New(&buf, []string{"a", "bb"}, 10)
		d.live, d.width = true, func() int { return cols }
		d.Phase(1, "a", "sample")
		d.Step(1, 10, 2*time.Second, map[string]string{"a": "acc 0.500 len 12.0 ω 0.93 clip 0.00/0.10", "bb": "acc 0.250 len 9.5 ω 1.07 clip 0.00/0.20"})
		out := buf.String()
		block := out[strings.LastIndex(out, "step 1/10"):]
		want := []string{
			"step 1/10  2.0s  ETA 18s",
			"  a              waiting            last: sample 0.0s",
			"    acc 0.500 len 12.0 ω 0.93 clip 0.00/0.10",
			"  bb             waiting            ",
			"    acc 0.250 len 9.5 ω 1.07 clip 0.00/0.20",
		}
		got := strings.Split(strings.TrimSuffix(block, "\n"), "\n")
		if len(got) != len(want) || d.lines != len(want) {
			t.Fatalf("cols %d: block of %d lines (%d counted), want %d:\n%s", cols, len(got), d.lines, len(want), block)
		}
		for i, w := range want {
			if r := []rune(w); cols > 0 && len(r) > cols-1 {
				w = string(r[:cols-1])
			}
			if got[i] != w {
				t.Errorf("cols %d: line %d %q, want %q", cols, i, got[i], w)
			}
		}
	}
}
