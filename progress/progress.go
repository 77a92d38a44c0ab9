// Package progress shows a training run's progress: on a terminal, a live
// status block redrawn in place (one line per agent with its current phase and
// the time its phases took in the last step, and a run line with the last
// step's numbers and the ETA); otherwise, or with CI=true, plain timestamped
// log lines: one per step (the step's numbers, its time and the ETA), and,
// with Verbose, one per phase (sample, reward, score, update, …) of every
// agent's step. Messages (Log: evaluations, resumes, warnings) are lines in
// both, above the live block on a terminal.
//
// An agent that waits — for the other agents' rollouts, for an unreachable
// bus — says so (Wait): what it waits for and since when, under its line
// on a terminal, or as a log line repeated every plainEvery while the wait
// lasts.
package progress

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// Display implements train.Observer.
type Display struct {
	mu     sync.Mutex
	w      io.Writer
	live   bool
	start  time.Time
	lines  int // lines of the last live block
	step   int
	total  int
	done   int // steps completed in this process
	spent  time.Duration
	agents []string
	phase  map[string]string    // agent → current phase
	since  map[string]time.Time // agent → phase start
	last   map[string]map[string]time.Duration
	msg    string
	nums   map[string]string // agent → its numbers of the last step (live)
	width  func() int        // the terminal's columns (live; 0: unknown)
	waits  map[string]*wait  // agent → what it waits for, while it waits
	now    func() time.Time
	// Verbose, without a terminal, logs each phase of every agent's step
	// (a terminal's live block shows them anyway). Set it before use.
	Verbose bool
}

// wait is what an agent waits for.
type wait struct {
	what, detail string
	since        time.Time
	said         string    // the plain line last written ("" none)
	saidAt       time.Time // and when
}

// plainEvery is how often plain output repeats a wait that goes on.
const plainEvery = 5 * time.Second

// New returns a display writing to w; live redraw only when w is a terminal
// and CI is not set.
func New(w io.Writer, agents []string, totalSteps int) *Display {
	d := &Display{w: w, start: time.Now(), total: totalSteps, agents: agents,
		phase: map[string]string{}, since: map[string]time.Time{}, last: map[string]map[string]time.Duration{},
		waits: map[string]*wait{}, nums: map[string]string{}, now: time.Now, width: func() int { return 0 }}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) && os.Getenv("CI") == "" {
		d.live = true
		d.width = func() int {
			cols, _, err := term.GetSize(int(f.Fd()))
			if err != nil {
				return 0
			}
			return cols
		}
	}
	return d
}

// Wait shows that agent waits for what ("the rollouts of b, c at step 3",
// "the bus (nats://host:4222)"), doing detail ("publish step 3"; may be
// empty), since the time given (the first call's counts until Waited).
// Call it again while the wait lasts, to change what or detail and refresh
// the time; Waited ends it.
func (d *Display) Wait(agent, what, detail string, since time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	w := d.waits[agent]
	if w == nil {
		w = &wait{since: since}
		d.waits[agent] = w
	}
	w.what, w.detail = what, detail
	if d.live {
		d.redraw()
		return
	}
	line := fmt.Sprintf("step %d/%d %s: %s", d.step, d.total, agent, w.text(now))
	if w.said == "" || w.what != w.said || now.Sub(w.saidAt) >= plainEvery {
		fmt.Fprintf(d.w, "%s %s\n", now.Format("15:04:05"), line)
		w.said, w.saidAt = w.what, now
	}
}

// Waited ends agent's wait (nothing when it waits for nothing).
func (d *Display) Waited(agent string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	w := d.waits[agent]
	if w == nil {
		return
	}
	delete(d.waits, agent)
	if d.live {
		d.redraw()
	} else if w.said != "" {
		now := d.now()
		fmt.Fprintf(d.w, "%s step %d/%d %s: waited %s for %s\n", now.Format("15:04:05"), d.step, d.total, agent, seconds(now.Sub(w.since)), w.what)
	}
}

func (w *wait) text(now time.Time) string {
	s := fmt.Sprintf("waiting for %s since %s", w.what, seconds(now.Sub(w.since)))
	if w.detail != "" {
		s += ": " + w.detail
	}
	return s
}

func seconds(d time.Duration) string { return fmt.Sprintf("%d s", int(d.Seconds())) }

// Phase records that agent started phase at step.
func (d *Display) Phase(step int, agent, phase string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	if prev, ok := d.phase[agent]; ok && prev != "" {
		if d.last[agent] == nil {
			d.last[agent] = map[string]time.Duration{}
		}
		d.last[agent][prev] = now.Sub(d.since[agent])
	}
	d.phase[agent], d.since[agent], d.step = phase, now, step
	if d.live {
		d.redraw()
	} else if agent != "" && d.Verbose {
		fmt.Fprintf(d.w, "%s step %d/%d %s: %s\n", now.Format("15:04:05"), step, d.total, agent, phase)
	}
}

// Step records a finished step, which took elapsed, with the numbers of
// the display's agents by name (those of other agents are not shown): one
// line, with the step's time, the ETA at the mean time of the steps done in
// this process and each agent's name and numbers, " · " between agents. The
// live block shows each agent's numbers under the agent's line.
func (d *Display) Step(step, total int, elapsed time.Duration, nums map[string]string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.done++
	d.spent += elapsed
	d.step, d.total = step, total
	for a := range d.phase {
		if d.phase[a] != "" {
			if d.last[a] == nil {
				d.last[a] = map[string]time.Duration{}
			}
			d.last[a][d.phase[a]] = time.Since(d.since[a])
		}
		d.phase[a] = ""
	}
	per := d.spent / time.Duration(d.done)
	eta := per * time.Duration(total-step)
	head := fmt.Sprintf("step %d/%d  %.1fs  ETA %s", step, total, elapsed.Seconds(), eta.Round(time.Second))
	var parts []string
	for _, a := range d.agents {
		if n, ok := nums[a]; ok {
			d.nums[a] = n
			parts = append(parts, a+" "+n)
		}
	}
	if d.live {
		d.msg = head
		d.redraw()
		return
	}
	fmt.Fprintf(d.w, "%s %s  %s\n", time.Now().Format("15:04:05"), head, strings.Join(parts, " · "))
}

// Log prints a message above the live block (or as a line).
func (d *Display) Log(msg string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.live {
		d.clear()
		fmt.Fprintln(d.w, msg)
		d.redraw()
		return
	}
	fmt.Fprintf(d.w, "%s %s\n", time.Now().Format("15:04:05"), msg)
}

// Close leaves the last block on screen.
func (d *Display) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.live {
		d.lines = 0
	}
}

func (d *Display) clear() {
	for range d.lines {
		fmt.Fprint(d.w, "\x1b[1A\x1b[2K")
	}
	d.lines = 0
}

func (d *Display) redraw() {
	d.clear()
	var b strings.Builder
	for _, a := range d.agents {
		ph := d.phase[a]
		if ph == "" {
			ph = "waiting"
		} else {
			ph = fmt.Sprintf("%s %.1fs", ph, time.Since(d.since[a]).Seconds())
		}
		fmt.Fprintf(&b, "  %-14s %-18s %s\n", a, ph, phaseTimes(d.last[a]))
		if n := d.nums[a]; n != "" {
			fmt.Fprintf(&b, "    %s\n", n)
		}
		if w := d.waits[a]; w != nil {
			fmt.Fprintf(&b, "    %s\n", w.text(d.now()))
		}
	}
	head := d.msg
	if head == "" {
		head = fmt.Sprintf("step %d/%d  elapsed %s", d.step, d.total, time.Since(d.start).Round(time.Second))
	}
	out := fit(head+"\n"+b.String(), d.width())
	d.lines = strings.Count(out, "\n")
	fmt.Fprint(d.w, out)
}

// fit cuts each line of s to cols-1 columns (nothing when cols is 0), so
// that no line wraps and clear erases the whole block.
func fit(s string, cols int) string {
	if cols <= 1 {
		return s
	}
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		body := strings.TrimSuffix(l, "\n")
		if r := []rune(body); len(r) > cols-1 {
			lines[i] = string(r[:cols-1]) + l[len(body):]
		}
	}
	return strings.Join(lines, "")
}

func phaseTimes(m map[string]time.Duration) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.1fs", k, m[k].Seconds()))
	}
	return "last: " + strings.Join(parts, " · ")
}
