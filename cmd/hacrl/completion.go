package main

import (
	"path/filepath"
	"strings"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/dataset"
	"github.com/hacrl/hacrl/metrics"
	"github.com/hacrl/hacrl/tokenizer"
	"github.com/hacrl/hacrl/train"
	"github.com/spf13/cobra"
)

// Shell completion (hacrl completion bash|zsh|fish|powershell, cobra's)
// completes, besides commands and flag names: the arguments by what they
// name (a CONFIG: *.yaml files; a CHECKPOINT or OUT: directories), the
// flags that take a directory or a file of a kind, and the values of the
// flags that take a name: --backend, --template, --format, eval's --set
// (the agent's task splits and the shared benchmarks, else files), train's
// and agent's --set (the config's keys, its agents by index and name) and
// plot's --metrics (the keys of the run's metrics.jsonl).

// backendNames are the backends --backend names (hacrl help).
var backendNames = []string{"go", "xla:cuda", "xla:cpu"}

// completions registers the argument and flag completions of c and its
// subcommands.
func completions(c *cobra.Command) {
	if c.Runnable() && c.ValidArgsFunction == nil && len(c.ValidArgs) == 0 {
		c.ValidArgsFunction = argCompletion(c)
	}
	for name, fn := range flagCompletions(c) {
		if f := c.Flags().Lookup(name); f != nil && f.Value.Type() != "bool" {
			c.RegisterFlagCompletionFunc(name, fn) //nolint:errcheck // registered once per command
		}
	}
	for _, s := range c.Commands() {
		completions(s)
	}
}

// argCompletion completes c's positional arguments by the first word of
// its usage line after the command's name.
func argCompletion(c *cobra.Command) cobra.CompletionFunc {
	words := strings.Fields(c.Use)
	arg := ""
	if len(words) > 1 {
		arg = strings.Trim(words[1], "[].")
	}
	return func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		switch {
		case len(args) > 0 && !strings.HasSuffix(c.Use, "...") && !strings.Contains(c.Use, "[PROMPT...]"):
			return nil, cobra.ShellCompDirectiveNoFileComp
		case len(args) > 0: // generate's prompts, tokenizer train's files
			return nil, cobra.ShellCompDirectiveDefault
		}
		switch arg {
		case "CONFIG":
			return []string{"yaml", "yml"}, cobra.ShellCompDirectiveFilterFileExt
		case "CHECKPOINT", "OUT":
			return nil, cobra.ShellCompDirectiveFilterDirs
		case "FILE":
			return nil, cobra.ShellCompDirectiveDefault
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
}

// flagCompletions are the completions of c's flags that take a name, a
// directory or a file of a kind.
func flagCompletions(c *cobra.Command) map[string]cobra.CompletionFunc {
	dirs := cobra.FixedCompletions(nil, cobra.ShellCompDirectiveFilterDirs)
	ext := func(exts ...string) cobra.CompletionFunc {
		return cobra.FixedCompletions(exts, cobra.ShellCompDirectiveFilterFileExt)
	}
	m := map[string]cobra.CompletionFunc{
		"backend":    names(backendNames),
		"template":   names([]string{tokenizer.KindPlain, tokenizer.KindChat, tokenizer.KindHF}),
		"adapter":    dirs,
		"base":       dirs,
		"dest":       dirs,
		"store":      dirs,
		"data":       dirs,
		"resume":     dirs,
		"xla-plugin": ext("so"),
		"jsonl":      ext("jsonl"),
		"messages":   ext("json", "jsonl"),
	}
	switch c.CommandPath() {
	case "hacrl train", "hacrl agent":
		m["set"] = setKeyCompletion
	case "hacrl eval":
		m["set"] = evalSetCompletion
	case "hacrl plot":
		m["format"] = names([]string{"png", "svg", "pdf"})
		m["metrics"] = metricsCompletion
	case "hacrl tokenizer train":
		m["template"] = names([]string{tokenizer.KindPlain, tokenizer.KindChat})
	}
	if c.CommandPath() != "hacrl generate" { // generate's --out is a file
		m["out"] = dirs
	}
	return m
}

// names completes to the values among list that start with what is typed.
func names(list []string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, typed string) ([]string, cobra.ShellCompDirective) {
		return withPrefix(list, typed), cobra.ShellCompDirectiveNoFileComp
	}
}

func withPrefix(list []string, typed string) []string {
	var out []string
	for _, s := range list {
		if strings.HasPrefix(s, typed) {
			out = append(out, s)
		}
	}
	return out
}

// evalSetCompletion completes eval's --set: test and train when the
// checkpoint argument names a task (or is not given yet), the shared
// benchmarks; when none matches what is typed, files.
func evalSetCompletion(_ *cobra.Command, args []string, typed string) ([]string, cobra.ShellCompDirective) {
	var list []string
	if len(args) == 0 {
		list = []string{"test", "train"}
	} else if m, err := train.ReadMeta(args[0]); err == nil && m.Task != nil { // agent.json alone: no weights for a TAB
		list = []string{"test", "train"}
	}
	list = append(list, dataset.Benchmarks()...)
	if got := withPrefix(list, typed); len(got) > 0 {
		return got, cobra.ShellCompDirectiveNoFileComp
	}
	return nil, cobra.ShellCompDirectiveDefault // a .jsonl or .parquet file
}

// setKeyCompletion completes train's and agent's --set KEY=VALUE up to the
// "=": the keys of the run schema, the agents of the CONFIG argument by
// index and by name.
func setKeyCompletion(_ *cobra.Command, args []string, typed string) ([]string, cobra.ShellCompDirective) {
	var names []string
	if len(args) > 0 {
		if c, err := config.Load(args[0]); err == nil {
			names = c.AgentNames()
		}
	}
	return config.CompleteKey(typed, len(names), names), cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp
}

// metricsCompletion completes plot's --metrics, a comma-separated list,
// with the keys of the run's metrics.jsonl.
func metricsCompletion(_ *cobra.Command, args []string, typed string) ([]string, cobra.ShellCompDirective) {
	if len(args) == 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	recs, err := metrics.ReadFile(filepath.Join(args[0], metrics.FileName))
	if err != nil && metrics.Torn(err) == nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	done, last := "", typed
	if i := strings.LastIndex(typed, ","); i >= 0 {
		done, last = typed[:i+1], typed[i+1:]
	}
	var out []string
	for _, k := range withPrefix(metrics.Keys(recs), last) {
		out = append(out, done+k)
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
