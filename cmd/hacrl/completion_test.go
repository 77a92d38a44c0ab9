package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/metrics"
	"github.com/spf13/cobra"
)

// complete runs cobra's completion entry, hacrl __complete args…, as the
// shell scripts do, and returns the completions and the directive.
func complete(t *testing.T, args ...string) ([]string, cobra.ShellCompDirective) {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := execute(context.Background(), append([]string{cobra.ShellCompRequestCmd}, args...), strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("hacrl __complete %q: exit %d, %s", args, code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	last := lines[len(lines)-1]
	var d int
	if _, err := fmt.Sscanf(last, ":%d", &d); err != nil {
		t.Fatalf("hacrl __complete %q: no directive line in %q", args, out.String())
	}
	return lines[:len(lines)-1], cobra.ShellCompDirective(d)
}

// Completion through cobra's __complete entry: flag values that are names,
// config files and directories for the arguments that name them, the keys
// of a run for plot --metrics.
func TestCompletion(t *testing.T) {
	run := t.TempDir()
	w, err := metrics.Open(run, metrics.Fresh, metrics.WithTensorBoard(false))
	if err != nil {
		t.Fatal(err)
	}
	for step := range 2 {
		if err := w.Write(metrics.Record{Step: step, Agent: "a", Time: 1, Values: map[string]float64{"reward/mean": 1, "eval/test/greedy_acc": 0.5, "loss/policy": 0}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	bpe := filepath.Join("..", "..", "examples", "agents", "llama-bpe")
	tests := []struct {
		args      []string
		want      []string // exactly, in order
		directive cobra.ShellCompDirective
	}{
		{[]string{"eval", bpe, "--set", ""}, []string{"test", "train", "aime24", "aime25", "amc23", "gsm8k", "math", "math500", "math_train", "minerva_math", "olympiadbench"}, cobra.ShellCompDirectiveNoFileComp},
		{[]string{"eval", bpe, "--set", "gsm"}, []string{"gsm8k"}, cobra.ShellCompDirectiveNoFileComp},
		{[]string{"eval", bpe, "--set", "data/my"}, nil, cobra.ShellCompDirectiveDefault}, // a file
		{[]string{"train", filepath.Join("..", "..", "examples", "arith-hacpo.yaml"), "--set", "agents["}, []string{"agents[0].", "agents[1].", "agents[gpt-char].", "agents[llama-bpe]."}, cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp},
		{[]string{"agent", filepath.Join("..", "..", "examples", "arith-hacpo.yaml"), "--set", "agents[llama-bpe].optimizer.l"}, []string{"agents[llama-bpe].optimizer.lr="}, cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp},
		{[]string{"train", filepath.Join("..", "..", "examples", "arith-hacpo.yaml"), "--set", "ste"}, []string{"steps="}, cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp},
		{[]string{"eval", bpe, "--backend", ""}, []string{"go", "xla:cuda", "xla:cpu"}, cobra.ShellCompDirectiveNoFileComp},
		{[]string{"serve", bpe, "--template", "c"}, []string{"chat"}, cobra.ShellCompDirectiveNoFileComp},
		{[]string{"plot", run, "--format", ""}, []string{"png", "svg", "pdf"}, cobra.ShellCompDirectiveNoFileComp},
		{[]string{"plot", run, "--metrics", ""}, []string{"eval/test/greedy_acc", "loss/policy", "reward/mean"}, cobra.ShellCompDirectiveNoFileComp},
		{[]string{"plot", run, "--metrics", "reward/mean,e"}, []string{"reward/mean,eval/test/greedy_acc"}, cobra.ShellCompDirectiveNoFileComp},
		{[]string{"train", ""}, []string{"yaml", "yml"}, cobra.ShellCompDirectiveFilterFileExt},
		{[]string{"experiment", ""}, []string{"yaml", "yml"}, cobra.ShellCompDirectiveFilterFileExt},
		{[]string{"agent", ""}, []string{"yaml", "yml"}, cobra.ShellCompDirectiveFilterFileExt},
		{[]string{"eval", ""}, nil, cobra.ShellCompDirectiveFilterDirs},
		{[]string{"serve", ""}, nil, cobra.ShellCompDirectiveFilterDirs},
		{[]string{"plot", ""}, nil, cobra.ShellCompDirectiveFilterDirs},
		{[]string{"eval", bpe, ""}, nil, cobra.ShellCompDirectiveNoFileComp}, // one checkpoint only
		{[]string{"merge", "--adapter", ""}, nil, cobra.ShellCompDirectiveFilterDirs},
		{[]string{"train", "x.yaml", "--out", ""}, nil, cobra.ShellCompDirectiveFilterDirs},
	}
	for _, tt := range tests {
		got, d := complete(t, tt.args...)
		if !slices.Equal(got, tt.want) || d != tt.directive {
			t.Errorf("hacrl __complete %q = %q, directive %d; want %q, %d", tt.args, got, d, tt.want, tt.directive)
		}
	}
}

// The bash script cobra writes loads in bash and registers hacrl.
func TestCompletionScriptLoads(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal("bash is needed to load the completion script:", err)
	}
	out, err := exec.Command(bash, "-c", `source <("$0" completion bash) && complete -p hacrl`, hacrlBin(t)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "__start_hacrl hacrl") {
		t.Errorf("bash: %v, %s", err, out)
	}
}
