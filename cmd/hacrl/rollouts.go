package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/hacrl/hacrl/rollout"
	"github.com/spf13/cobra"
)

// rolloutsOptions are the flags of `hacrl rollouts`.
type rolloutsOptions struct {
	step           int
	agent, learner string
	json, prompts  bool
	limit          int
}

func rolloutsCmd() *cobra.Command {
	var o rolloutsOptions
	cmd := &cobra.Command{
		Use:   "rollouts OUT",
		Short: "Print a run's logged rollouts: the prompts, every agent's responses and what each learner made of them",
		Long: `Print the rollouts a run logged in OUT/rollouts (config rollouts: {every: N}).

Without --step, list the logged steps. With --step S, print that step's prompts
in order: the question and reference answer, then every agent's responses with
their reward, length and truncation, and for each learner that trained on a
response its advantage, ω (other agents' responses), importance ratio and
whether the clip kept it ("kept", or "below"/"above" the clip range: a cross
sample outside the stepwise bounds contributes no gradient).

--json prints the step's records as the file holds them, one JSON object per
line (the format is rollout.Record); only JSON goes to stdout.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("step") {
				return listRollouts(cmd.OutOrStdout(), args[0], o.json)
			}
			return showRollouts(cmd.OutOrStdout(), args[0], o)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.step, "step", 0, "the step to print (as in metrics.jsonl, from 1); without it, list the logged steps")
	f.StringVar(&o.agent, "agent", "", "only the responses of this agent")
	f.StringVar(&o.learner, "learner", "", "only this learner's use of each response (with --json: only the responses it trained on)")
	f.BoolVar(&o.json, "json", false, "print the JSON records (one per line) instead of text")
	f.BoolVar(&o.prompts, "prompts", false, "also print each agent's prompt as its template rendered it")
	f.IntVar(&o.limit, "limit", 0, "print at most this many prompts (0 = all)")
	return cmd
}

// logSteps returns the logged steps of the run directory out, or an error
// saying why there are none.
func logSteps(out string) ([]int, error) {
	if st, err := os.Stat(out); err != nil {
		return nil, fmt.Errorf("run directory: %w", err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a run directory", out)
	}
	steps, err := rollout.LogSteps(out)
	if err != nil {
		return nil, err
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("no rollout logs in %s (a run writes them with rollouts: {every: N} in its config)", filepath.Join(out, rollout.LogDir))
	}
	return steps, nil
}

// listRollouts prints the logged steps and their files' sizes.
func listRollouts(w io.Writer, out string, asJSON bool) error {
	steps, err := logSteps(out)
	if err != nil {
		return err
	}
	if asJSON {
		data, err := json.Marshal(struct {
			Dir   string `json:"dir"`
			Steps []int  `json:"steps"`
		}{filepath.Join(out, rollout.LogDir), steps})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", data)
		return err
	}
	fmt.Fprintf(w, "%d logged steps in %s (print one with --step S)\n", len(steps), filepath.Join(out, rollout.LogDir))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "step\tfile\tsize")
	for _, s := range steps {
		p := rollout.LogPath(out, s)
		size := "?"
		if st, err := os.Stat(p); err == nil {
			size = fmt.Sprintf("%.1f KiB", float64(st.Size())/1024)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\n", s, filepath.Base(p), size)
	}
	return tw.Flush()
}

// showRollouts prints one step's log.
func showRollouts(w io.Writer, out string, o rolloutsOptions) error {
	if o.step < 1 {
		return usage("--step: steps count from 1, got %d", o.step)
	}
	if o.limit < 0 {
		return usage("--limit: must be >= 0 (0 = all), got %d", o.limit)
	}
	path := rollout.LogPath(out, o.step)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		steps, err := logSteps(out)
		if err != nil {
			return err
		}
		return fmt.Errorf("no rollout log for step %d in %s; logged steps: %s", o.step, filepath.Dir(path), stepList(steps))
	}
	type line struct {
		raw []byte
		rec rollout.Record
	}
	var lines []line
	agents, learners := []string{}, []string{}
	prompts := map[int]bool{}
	err := rollout.ScanLog(path, func(raw []byte, rec *rollout.Record) error {
		if !slices.Contains(agents, rec.Agent) {
			agents = append(agents, rec.Agent)
		}
		for _, u := range rec.Learners {
			if !slices.Contains(learners, u.Learner) {
				learners = append(learners, u.Learner)
			}
		}
		prompts[rec.Prompt] = true
		lines = append(lines, line{slices.Clone(raw), *rec})
		return nil
	})
	if err != nil {
		return err
	}
	if o.agent != "" && !slices.Contains(agents, o.agent) {
		return fmt.Errorf("--agent: no agent %q in step %d (agents: %s)", o.agent, o.step, strings.Join(agents, ", "))
	}
	if o.learner != "" && !slices.Contains(learners, o.learner) {
		return fmt.Errorf("--learner: no learner %q in step %d (learners: %s)", o.learner, o.step, strings.Join(learners, ", "))
	}
	// The records to print: the agent's, the learner's, in the first limit prompts.
	var recs []rollout.Record
	var raws [][]byte
	shown, last := 0, -1
	for _, l := range lines {
		if l.rec.Prompt != last {
			if o.limit > 0 && shown == o.limit {
				break
			}
			shown++
			last = l.rec.Prompt
		}
		if o.agent != "" && l.rec.Agent != o.agent {
			continue
		}
		if o.learner != "" && !slices.ContainsFunc(l.rec.Learners, func(u rollout.LearnerUse) bool { return u.Learner == o.learner }) {
			continue
		}
		recs = append(recs, l.rec)
		raws = append(raws, l.raw)
	}
	if o.json {
		for _, raw := range raws {
			if _, err := fmt.Fprintf(w, "%s\n", raw); err != nil {
				return err
			}
		}
		return nil
	}
	return printRollouts(w, o, agents, len(prompts), recs)
}

// stepList is "1, 2, 3" or, for many steps, "1, 2, 3, …, 98, 99, 100 (100 steps)".
func stepList(steps []int) string {
	str := func(s []int) string {
		parts := make([]string, len(s))
		for i, v := range s {
			parts[i] = strconv.Itoa(v)
		}
		return strings.Join(parts, ", ")
	}
	if len(steps) <= 10 {
		return str(steps)
	}
	return fmt.Sprintf("%s, …, %s (%d steps)", str(steps[:3]), str(steps[len(steps)-3:]), len(steps))
}

// printRollouts prints records grouped by prompt: the question, then each
// response with its reward and, per learner, what the update made of it.
func printRollouts(w io.Writer, o rolloutsOptions, agents []string, prompts int, recs []rollout.Record) error {
	// The step's summary: per agent, mean reward and truncations of the shown responses.
	fmt.Fprintf(w, "step %d: %d prompts, agents %s\n", o.step, prompts, strings.Join(agents, ", "))
	type sum struct {
		n, truncated int
		reward       float64
	}
	sums := map[string]*sum{}
	for _, r := range recs {
		s := sums[r.Agent]
		if s == nil {
			s = &sum{}
			sums[r.Agent] = s
		}
		s.n++
		s.reward += r.Reward
		if r.Truncated {
			s.truncated++
		}
	}
	for _, a := range agents {
		if s := sums[a]; s != nil {
			fmt.Fprintf(w, "  %-16s %d responses shown, mean reward %.3f, %d truncated\n", a, s.n, s.reward/float64(s.n), s.truncated)
		}
	}
	group := map[int]int{} // responses per (prompt, agent) shown, for "response i/n"
	for _, r := range recs {
		group[r.Prompt*len(agents)+slices.Index(agents, r.Agent)]++
	}
	last, lastAgent := -1, ""
	for _, r := range recs {
		if r.Prompt != last {
			last, lastAgent = r.Prompt, ""
			fmt.Fprintf(w, "\n=== prompt %d of %d · %s ===\n", r.Prompt+1, prompts, r.ProblemID)
			printBlock(w, "question: ", r.Question)
			if r.Answer != "" {
				printBlock(w, "answer:   ", r.Answer)
			}
		}
		if o.prompts && r.Agent != lastAgent {
			fmt.Fprintf(w, "\n%s's prompt:\n", r.Agent)
			printBlock(w, "    ", r.PromptText)
		}
		lastAgent = r.Agent
		end := "stopped"
		if r.Truncated {
			end = "truncated (max_new_tokens)"
		}
		fmt.Fprintf(w, "\n--- %s, response %d of %d: reward %.3f · %d tokens · %s\n", r.Agent, r.Sample+1,
			group[r.Prompt*len(agents)+slices.Index(agents, r.Agent)], r.Reward, r.Tokens, end)
		if r.Response == "" {
			fmt.Fprintln(w, "    (empty)")
		} else {
			printBlock(w, "    ", r.Response)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "    learner\tadvantage\tω\tratio\tclip")
		for _, u := range r.Learners {
			if o.learner != "" && u.Learner != o.learner {
				continue
			}
			fmt.Fprintf(tw, "    %s\t%+.4f\t%s\t%.4f\t%s\n", learnerName(u), u.Advantage, omega(u), u.Ratio, clipState(u))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// printBlock prints text with prefix before its first line and as much space
// before the others.
func printBlock(w io.Writer, prefix, text string) {
	pad := strings.Repeat(" ", len([]rune(prefix)))
	for i, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		p := pad
		if i == 0 {
			p = prefix
		}
		fmt.Fprintf(w, "%s%s\n", p, l)
	}
}

func learnerName(u rollout.LearnerUse) string {
	if u.Self {
		return u.Learner + " (self)"
	}
	return u.Learner
}

func omega(u rollout.LearnerUse) string {
	if u.Self {
		return "-"
	}
	return fmt.Sprintf("%.3f", u.Omega)
}

// clipState says whether the clip kept the sample and what else happened to it.
func clipState(u rollout.LearnerUse) string {
	s := "kept"
	if !u.Kept {
		s = u.Clip + " the clip range"
	}
	var notes []string
	if u.ClippedTokens > 0 {
		notes = append(notes, fmt.Sprintf("%d tokens clipped", u.ClippedTokens))
	}
	if u.RetokenizeChanged {
		notes = append(notes, "text changed by re-tokenization")
	}
	if u.RetokenizeCut {
		notes = append(notes, "re-tokenized response cut")
	}
	if u.Skipped {
		notes = append(notes, "update skipped (non-finite)")
	}
	if len(notes) > 0 {
		s += "; " + strings.Join(notes, "; ")
	}
	return s
}
