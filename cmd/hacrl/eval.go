package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/dataset"
	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/task"
	"github.com/hacrl/hacrl/tokenizer"
	"github.com/hacrl/hacrl/train"
	"github.com/spf13/cobra"
)

func evalCmd() *cobra.Command {
	var (
		set, backendCfg, template string
		problems, samples, maxNew int
		temperature               float64
		seed                      int64
	)
	cmd := &cobra.Command{
		Use:   "eval CHECKPOINT --set NAME",
		Short: "Evaluate one saved agent alone on a task split, a shared benchmark or a dataset",
		Long: `Evaluate one saved agent, alone, as at inference.

--set is "test" or "train" (a split of the task the agent was trained on, from
its agent.json), a data set of the shared data directory (` + strings.Join(dataset.Benchmarks(), ", ") + `;
answers checked by the math verifier; see hacrl help for where the data is
found), or a JSONL/Parquet file. Greedy accuracy always; with --samples k also
avg@k, pass@k and maj@k at --temperature.
Prints one JSON object on standard output, nothing else.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			meta, err := train.ReadMeta(dir)
			if err != nil {
				return err
			}
			if template != "" {
				meta.Template.Kind = template
			}
			b, err := backend.New(backend.Choose(backendCfg))
			if err != nil {
				return err
			}
			m, err := model.Load(b, dir)
			if err != nil {
				return err
			}
			tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
			if err != nil {
				return err
			}
			var t task.Task
			split := task.Test
			switch {
			case set == "test" || set == "train":
				if meta.Task == nil {
					return fmt.Errorf("--set %s: %s/agent.json names no task; give a benchmark name or a dataset file", set, dir)
				}
				tc := &config.Config{Task: meta.Task}
				if t, err = train.BuildTask(tc); err != nil {
					return err
				}
				split = task.Split(set)
			case isBenchmark(set):
				d, err := dataset.Benchmark(set)
				if err != nil {
					return err
				}
				if d.Skipped() > 0 {
					fmt.Fprintf(os.Stderr, "hacrl eval: %s: %d records without a reference answer left out\n", set, d.Skipped())
				}
				t = d
			default:
				if t, err = train.DatasetTask(set, dataset.Options{}, "", task.Test); err != nil {
					return err
				}
			}
			n, finite := task.Len(t, split)
			if problems > 0 && (!finite || problems < n) {
				n = problems
			} else if !finite {
				return fmt.Errorf("--problems is required for a generated task's split")
			}
			probs := make([]task.Problem, n)
			for i := range probs {
				probs[i] = t.Problem(split, i)
			}
			a := &train.Agent{Name: meta.Name, Model: m, Tok: tok, Template: tokenizer.Template{Kind: meta.Template.Kind, System: meta.Template.System}}
			a.Sampling = model.SampleOptions{MaxNewTokens: meta.Sampling.MaxNewTokens, Temperature: 1, TopP: meta.Sampling.TopP, TopK: meta.Sampling.TopK, Stop: a.Template.StopTokens(tok)}
			if maxNew > 0 {
				a.Sampling.MaxNewTokens = maxNew
			}
			if err := train.CheckFits(a, probs, a.Sampling.MaxNewTokens); err != nil {
				return fmt.Errorf("--set %s: %w", set, err)
			}
			es := config.EvalSet{Name: set, Samples: samples, Temperature: temperature, MaxNewTokens: a.Sampling.MaxNewTokens}
			res, err := train.Evaluate(cmd.Context(), a, t, probs, es, func(p string) *rand.Rand {
				return rand.New(rand.NewPCG(uint64(seed), uint64(len(p))))
			})
			if err != nil {
				return err
			}
			out := map[string]any{"checkpoint": dir, "set": set, "problems": res.Problems}
			keys := make([]string, 0, len(res.Values))
			for k := range res.Values {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				out[k] = res.Values[k]
			}
			out["sampling"] = map[string]any{"temperature": temperature, "samples": samples, "max_new_tokens": a.Sampling.MaxNewTokens, "template": meta.Template.Kind, "seed": seed}
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(out)
		},
	}
	f := cmd.Flags()
	f.StringVar(&set, "set", "test", "test, train, a benchmark name or a JSONL/Parquet file")
	f.IntVar(&problems, "problems", 0, "number of problems (0: all of a dataset; required for a generated task)")
	f.IntVar(&samples, "samples", 0, "k samples per problem for avg@k, pass@k and maj@k (0: greedy only)")
	f.Float64Var(&temperature, "temperature", 1.0, "sampling temperature for --samples")
	f.IntVar(&maxNew, "max-new-tokens", 0, "response length limit (default: the agent's)")
	f.StringVar(&template, "template", "", "override the agent's prompt template (plain or chat)")
	f.Int64Var(&seed, "seed", 0, "sampling seed")
	f.StringVar(&backendCfg, "backend", "", "GoMLX backend config")
	return cmd
}

func isBenchmark(name string) bool {
	for _, b := range dataset.Benchmarks() {
		if b == name {
			return true
		}
	}
	return false
}
