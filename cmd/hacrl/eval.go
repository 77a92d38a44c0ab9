package main

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/dataset"
	"github.com/hacrl/hacrl/internal/suggest"
	"github.com/hacrl/hacrl/task"
	"github.com/hacrl/hacrl/tokenizer"
	"github.com/hacrl/hacrl/train"
	"github.com/spf13/cobra"
)

func evalCmd() *cobra.Command {
	var (
		set, backendCfg, template, suffix string
		computeDType                      computeDTypeFlag
		ad                                adapterFlags
		problems, samples, maxNew         int
		temperature                       float64
		seed                              int64
	)
	cmd := &cobra.Command{
		Use:   "eval CHECKPOINT --set NAME",
		Short: "Evaluate one saved agent alone on a task split, a shared benchmark or a dataset",
		Long: `Evaluate one saved agent, alone, as at inference.

--set is "test" or "train" (a split of the task the agent was trained on, from
its agent.json), a data set of the shared data directory (` + strings.Join(dataset.Benchmarks(), ", ") + `;
answers checked by the math verifier; see hacrl help for where the data is
found), or a JSONL/Parquet file (named with .jsonl or .parquet). A split of
the generated task has no end: --problems (default ` + fmt.Sprint(generatedProblems) + `) says how many of
its problems, always the same ones. Greedy accuracy always; with --samples k also
avg@k, pass@k and maj@k at --temperature (0 is greedy, so every draw equals
the greedy answer). --template replaces the prompt template.
Prints one JSON object on standard output, nothing else; a bad flag value
exits with status 2.

` + templateHelp + "\n\n" + adapterHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkEvalFlags(cmd, set, template, problems, samples, maxNew, temperature); err != nil {
				return err
			}
			if _, err := computeDType.dtype(); err != nil { // before loading anything
				return err
			}
			dir := args[0]
			saved, err := ad.load(dir, train.TemplateChoice{Kind: template})
			if err != nil {
				return err
			}
			if template != "" && template != saved.Meta.Template.Kind {
				fmt.Fprintf(cmd.ErrOrStderr(), "hacrl eval: --template %s replaces the checkpoint's %s\n", template, saved.Meta.Template.Kind)
			}
			t, probs, err := evalProblems(cmd, saved.Meta, set, suffix, problems)
			if err != nil {
				return err
			}
			b, err := backend.New(backend.Choose(backendCfg))
			if err != nil {
				return err
			}
			a, err := saved.Agent(b)
			if err != nil {
				return err
			}
			if err := computeDType.apply(a.Model); err != nil {
				return err
			}
			if maxNew > 0 {
				a.Sampling.MaxNewTokens = maxNew
			}
			if err := train.CheckFits(a, probs, a.Sampling.MaxNewTokens); err != nil {
				return fmt.Errorf("--set %s: %w\n%s", set, err, fitHint(a, probs, maxNew > 0))
			}
			es := config.EvalSet{Name: set, Samples: samples, Temperature: temperature, MaxNewTokens: a.Sampling.MaxNewTokens}
			res, err := train.Evaluate(cmd.Context(), a, t, probs, es, func(p string) *rand.Rand {
				return rand.New(rand.NewPCG(uint64(seed), uint64(len(p))))
			})
			if err != nil {
				return err
			}
			out := map[string]any{"checkpoint": dir, "set": set, "problems": res.Problems}
			if saved.Adapter != "" {
				out["checkpoint"], out["adapter"] = saved.Base, saved.Adapter
			}
			keys := make([]string, 0, len(res.Values))
			for k := range res.Values {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				out[k] = res.Values[k]
			}
			out["sampling"] = map[string]any{"temperature": temperature, "samples": samples, "max_new_tokens": a.Sampling.MaxNewTokens, "template": a.Template.Kind, "seed": seed}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(out)
		},
	}
	f := cmd.Flags()
	f.StringVar(&set, "set", "test", "test, train, a benchmark name or a JSONL/Parquet file")
	f.IntVar(&problems, "problems", 0, fmt.Sprintf("number of problems (0: all of a dataset, the first %d of a generated task's split)", generatedProblems))
	f.IntVar(&samples, "samples", 0, "k samples per problem for avg@k, pass@k and maj@k (0: greedy only)")
	f.Float64Var(&temperature, "temperature", 1.0, "sampling temperature for --samples (0: greedy)")
	f.IntVar(&maxNew, "max-new-tokens", 0, "response length limit (default: the agent's)")
	f.StringVar(&template, "template", "", "override the agent's prompt template (plain, chat or hf; default: its agent.json's, else hf when it has a chat template, else plain)")
	f.StringVar(&suffix, "prompt-suffix", "", `appended to every question of a benchmark or dataset, as the paper's "Let's think step by step and output the final answer within \boxed{}."`)
	f.Int64Var(&seed, "seed", 0, "sampling seed")
	f.StringVar(&backendCfg, "backend", "", "GoMLX backend config")
	computeDType.register(f, "the matrix products' dtype: float32, or bfloat16 (the graph engine on the XLA backend)")
	ad.register(f)
	return cmd
}

// checkEvalFlags reports a flag value eval cannot honour as a usage error.
func checkEvalFlags(cmd *cobra.Command, set, template string, problems, samples, maxNew int, temperature float64) error {
	switch {
	case set == "":
		return usage("--set is empty; give test, train, a benchmark name or a JSONL/Parquet file")
	case template != "" && template != tokenizer.KindPlain && template != tokenizer.KindChat && template != tokenizer.KindHF:
		return usage("--template must be plain, chat or hf, got %q", template)
	case problems < 0:
		return usage("--problems must be >= 0 (0: all of a dataset), got %d", problems)
	case samples < 0:
		return usage("--samples must be >= 0 (0: greedy only), got %d", samples)
	case maxNew < 0:
		return usage("--max-new-tokens must be >= 0 (0: the agent's), got %d", maxNew)
	case temperature < 0 || math.IsNaN(temperature) || math.IsInf(temperature, 0):
		return usage("--temperature must be a finite number >= 0 (0: greedy), got %v", temperature)
	case cmd.Flags().Changed("temperature") && samples == 0:
		return usage("--temperature applies to the --samples k draws; give --samples k > 0 (greedy accuracy needs no temperature)")
	}
	return nil
}

func isBenchmark(name string) bool {
	for _, b := range dataset.Benchmarks() {
		if b == name {
			return true
		}
	}
	return false
}

// evalProblems returns the task and the problems --set names: a split of the
// generated task in the agent's agent.json, a shared data set, or a dataset
// file, the latter two with suffix after every question.
func evalProblems(cmd *cobra.Command, meta train.Meta, set, suffix string, problems int) (task.Task, []task.Problem, error) {
	var t task.Task
	split := task.Test
	switch {
	case set == "test" || set == "train":
		if suffix != "" {
			return nil, nil, usage("--prompt-suffix applies to a benchmark or a dataset file, not to the %s split of a generated task", set)
		}
		if meta.Task == nil {
			return nil, nil, fmt.Errorf("--set %s: the checkpoint's agent.json names no task; give a benchmark name or a dataset file", set)
		}
		var err error
		if t, err = train.BuildTask(&config.Config{Task: meta.Task}); err != nil {
			return nil, nil, err
		}
		split = task.Split(set)
	case isBenchmark(set):
		d, err := dataset.Benchmark(set)
		if err != nil {
			return nil, nil, err
		}
		if d.Skipped() > 0 {
			fmt.Fprintf(cmd.ErrOrStderr(), "hacrl eval: %s: %d records without a reference answer left out\n", set, d.Skipped())
		}
		t = d
		if suffix != "" {
			t = d.WithSuffix(suffix)
		}
	default:
		if err := checkDataFile(set); err != nil {
			return nil, nil, err
		}
		var err error
		if t, err = train.DatasetTask(set, dataset.Options{}, suffix, task.Test); err != nil {
			return nil, nil, err
		}
	}
	n, finite := task.Len(t, split)
	switch {
	case problems > 0 && (!finite || problems < n):
		n = problems
	case !finite:
		n = generatedProblems
	}
	probs := make([]task.Problem, n)
	for i := range probs {
		probs[i] = t.Problem(split, i)
	}
	return t, probs, nil
}

// generatedProblems is how many problems of a generated task's split hacrl
// eval takes without --problems: as many as the examples' evaluations.
const generatedProblems = 200

// checkDataFile refuses a --set that is neither a split, a benchmark nor a
// data file hacrl reads, listing what it can be.
func checkDataFile(set string) error {
	ext := strings.ToLower(filepath.Ext(set))
	if ext == ".jsonl" || ext == ".parquet" {
		return nil
	}
	if st, err := os.Stat(set); err == nil && !st.IsDir() {
		return usage("--set %s: a data file must be named .jsonl (one JSON object a line) or .parquet", set)
	}
	if strings.Contains(set, "=") {
		// train's --set KEY=VALUE overrides a config key; eval's names the set.
		return usage("--set %s: eval's --set names what to evaluate on (test or train, a benchmark, or a .jsonl/.parquet file), not a config key (hacrl train --set KEY=VALUE overrides those); eval's settings are its flags: hacrl eval --help", set)
	}
	valid := append([]string{"test", "train"}, dataset.Benchmarks()...)
	msg := fmt.Sprintf("--set %s: no such split, benchmark or data file; want test or train (the splits of the agent's task), a benchmark (%s) or a .jsonl/.parquet file",
		set, strings.Join(dataset.Benchmarks(), ", "))
	if c := suggest.Closest(set, valid); c != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", c)
	}
	return usage("%s", msg)
}

// fitHint says what to do when some prompts of probs leave agent a too
// little room: the largest --max-new-tokens that fits them all, or fewer
// problems when none does.
func fitHint(a *train.Agent, probs []task.Problem, flagGiven bool) string {
	longest := 0
	for _, p := range probs {
		longest = max(longest, len(a.Template.Prompt(a.Tok, p.Question)))
	}
	ctx := a.Model.Config().MaxSeq
	if room := ctx - longest; room > 0 {
		hint := fmt.Sprintf("Give --max-new-tokens %d or less: the longest prompt has %d of the context's %d tokens.", room, longest, ctx)
		if !flagGiven {
			hint += fmt.Sprintf(" (%d is the checkpoint's agent.json max_new_tokens; a run that trained the agent may have used fewer: its agents[i].sampling.max_new_tokens.)", a.Sampling.MaxNewTokens)
		}
		return hint
	}
	return fmt.Sprintf("The longest prompt alone fills the context of %d tokens: give fewer --problems, a shorter --prompt-suffix or another --template.", ctx)
}
