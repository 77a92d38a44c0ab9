package main

import (
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/metrics"
)

// The progress a run writes on standard error without a terminal (here a
// pipe): one line per step, one per evaluation when it happens, and the
// phases of each step only with --verbose. The shortened main example of
// the processes tests (4 steps, evaluations at steps 0, 2 and 4) is the
// run; its numbers are checked against its metrics.jsonl.

var (
	stepLine  = regexp.MustCompile(`^\d\d:\d\d:\d\d step (\d+)/(\d+)  \d+\.\ds  ETA \S+  (.*)$`)
	phaseLine = regexp.MustCompile(`^\d\d:\d\d:\d\d step (\d+)/\d+ ([a-z-]+): ([a-z ]+)$`)
	waitLine  = regexp.MustCompile(`^\d\d:\d\d:\d\d step \d+/\d+ [a-z-]+: wait(ing|ed) `)
	evalLine  = regexp.MustCompile(`^\d\d:\d\d:\d\d eval step (\d+) (\S+) (\S+):((?: \S+ [0-9.]+)+) \((\d+) problems, \d+\.\ds\)$`)
	agentNums = regexp.MustCompile(`(?:^|· )([a-z-]+) acc ([0-9.]+) len ([0-9.]+)`)
)

// otherLines bounds the lines that are neither a step's nor an
// evaluation's: the plan, and what the run says at its end.
const otherLines = 12

// checkProgress checks the progress lines of agents (a run's, or one agent
// process's, without its prefix) against the run's metrics: exactly one
// line per step, in order, holding each agent's accuracy and mean length
// of the step; one line per evaluation of an agent on a set, right after
// the step it follows, holding the metrics as metrics.jsonl records them;
// phase lines only when verbose (then each agent's sample, reward, score
// and update at every step); and at most otherLines more.
func checkProgress(t *testing.T, what string, lines []string, steps int, agents []string, recs []metrics.Record, verbose bool) {
	t.Helper()
	rec := map[string]map[string]float64{} // "step agent" → values
	for _, r := range recs {
		if slices.Contains(agents, r.Agent) {
			key := fmt.Sprint(r.Step, " ", r.Agent)
			if rec[key] == nil {
				rec[key] = map[string]float64{}
			}
			for k, v := range r.Values {
				rec[key][k] = v
			}
		}
	}
	// near: printed is v rounded to the digits it shows.
	near := func(printed string, v float64) bool {
		p, err := strconv.ParseFloat(printed, 64)
		digits := 0
		if _, frac, ok := strings.Cut(printed, "."); ok {
			digits = len(frac)
		}
		return err == nil && math.Abs(p-v) <= 0.5*math.Pow(10, -float64(digits))+1e-12
	}
	done, other := 0, 0
	evals := map[string]bool{} // "step agent set" printed
	phases := map[string]bool{}
	for _, l := range lines {
		if m := stepLine.FindStringSubmatch(l); m != nil {
			done++
			if m[1] != strconv.Itoa(done) || m[2] != strconv.Itoa(steps) {
				t.Errorf("%s: step line %q, want step %d/%d", what, l, done, steps)
			}
			got := map[string]bool{}
			for _, a := range agentNums.FindAllStringSubmatch(m[3], -1) {
				got[a[1]] = true
				v := rec[fmt.Sprint(done, " ", a[1])]
				if !near(a[2], v["accuracy/train"]) || !near(a[3], v["length/mean"]) {
					t.Errorf("%s: step %d: %s acc %s len %s; metrics.jsonl has %v and %v", what, done, a[1], a[2], a[3], v["accuracy/train"], v["length/mean"])
				}
			}
			for _, a := range agents {
				if !got[a] {
					t.Errorf("%s: step line %q lacks agent %s's numbers", what, l, a)
				}
			}
			continue
		}
		if m := evalLine.FindStringSubmatch(l); m != nil {
			step, _ := strconv.Atoi(m[1])
			if step != done {
				t.Errorf("%s: %q comes after step %d's line, want right after step %d's", what, l, done, step)
			}
			evals[m[1]+" "+m[2]+" "+m[3]] = true
			v := rec[m[1]+" "+m[2]]
			f := strings.Fields(m[4])
			n := 0
			for i := 0; i+1 < len(f); i += 2 {
				want, ok := v["eval/"+m[3]+"/"+f[i]]
				if !ok || !near(f[i+1], want) {
					t.Errorf("%s: %q: %s %s; metrics.jsonl has eval/%s/%s %v (%v)", what, l, f[i], f[i+1], m[3], f[i], want, ok)
				}
				n++
			}
			for k := range v {
				if strings.HasPrefix(k, "eval/"+m[3]+"/") {
					n--
				}
			}
			if n != 0 {
				t.Errorf("%s: %q does not show every eval/%s metric of step %s: %v", what, l, m[3], m[1], v)
			}
			continue
		}
		if m := phaseLine.FindStringSubmatch(l); m != nil && !waitLine.MatchString(l) {
			if !verbose {
				t.Errorf("%s: a phase line without --verbose: %q", what, l)
			}
			phases[m[1]+" "+m[2]+" "+m[3]] = true
			continue
		}
		if !waitLine.MatchString(l) {
			other++
		}
	}
	if done != steps {
		t.Errorf("%s: %d step lines, want %d", what, done, steps)
	}
	if other > otherLines {
		t.Errorf("%s: %d lines besides the steps' and the evaluations', want at most %d:\n%s", what, other, otherLines, strings.Join(lines, "\n"))
	}
	// Every evaluation metrics.jsonl records has its line.
	for key, v := range rec {
		for k := range v {
			if set, _, ok := strings.Cut(strings.TrimPrefix(k, "eval/"), "/"); ok && strings.HasPrefix(k, "eval/") && !evals[key+" "+set] {
				t.Errorf("%s: no line for the evaluation at step/agent %s on %s", what, key, set)
				evals[key+" "+set] = true
			}
		}
	}
	if verbose {
		for s := 1; s <= steps; s++ {
			for _, a := range agents {
				for _, p := range []string{"sample", "reward", "score", "update"} {
					if !phases[fmt.Sprint(s, " ", a, " ", p)] {
						t.Errorf("%s: with --verbose, no line for step %d %s: %s", what, s, a, p)
					}
				}
			}
		}
	}
}

func lines(s string) []string { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }

// agentLines are the lines of one agent process, without their prefix.
func agentLines(stderr, agent string) []string {
	var out []string
	for _, l := range lines(stderr) {
		if rest, ok := strings.CutPrefix(l, "["+agent+"] "); ok {
			out = append(out, rest)
		}
	}
	return out
}

// TestProgressLines: a run without a terminal writes a line per step and
// per evaluation, with the numbers of its metrics.jsonl; --verbose adds
// every agent's phases.
func TestProgressLines(t *testing.T) {
	agents := []string{"gpt-char", "llama-bpe"}
	recs := reference(t)
	checkProgress(t, "one process", lines(referenceStderr), 4, agents, recs, false)

	out := filepath.Join(t.TempDir(), "verbose")
	res := run(t, hacrlBin(t), "", "", nil, "train", procConfig(t, out, "0.0001"), "--steps", "1", "--verbose",
		"--set", "eval.sets[0].problems=4")
	if res.code != 0 {
		t.Fatalf("status %d\n%s", res.code, res.stderr)
	}
	checkProgress(t, "--verbose", lines(res.stderr), 1, agents, stableMetrics(t, filepath.Join(out, "metrics.jsonl")), true)
	if !slices.ContainsFunc(lines(res.stderr), func(l string) bool { return strings.HasSuffix(l, "step 1/1 gpt-char: eval") }) {
		t.Errorf("--verbose: no eval phase line at step 1:\n%s", res.stderr)
	}
}
