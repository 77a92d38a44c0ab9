package main

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/metrics"
	"github.com/spf13/pflag"
)

// setConfig is a tiny run of the shipped agents: two steps of a few
// short responses.
const setConfig = `name: set
seed: 3
out: %OUT%
steps: 2
method: {name: hacpo}
task: {name: arith, digits: 2, operators: "+-"}
batch: {prompts_per_step: 2, responses_per_prompt: 2, mini_batch: 8}
agents:
  - name: gpt-char
    checkpoint: %ROOT%/examples/agents/gpt-char
    optimizer: {lr: 0.0001}
    sampling: {max_new_tokens: 16}
  - name: llama-bpe
    checkpoint: %ROOT%/examples/agents/llama-bpe
    template: {kind: chat}
    optimizer: {lr: 0.0001}
    sampling: {max_new_tokens: 16}
eval:
  at_start: false
  sets: [{name: test, split: test, problems: 4}]
checkpoint: {every: 1}
`

// TestTrainSet: hacrl train --set, end to end. A bad override is refused
// naming the flag (exit 1 for a value, 2 for the syntax); a run with
// overrides has the same metrics as the file edited to those values (and
// other metrics than the file as it is), records them in OUT/config.yaml,
// and resumes with the same overrides; with another value, or none, the
// resume is refused naming the key and the --set that matches.
func TestTrainSet(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, src string) string {
		t.Helper()
		path := filepath.Join(dir, name+".yaml")
		src = strings.NewReplacer("%OUT%", filepath.Join(dir, name), "%ROOT%", root).Replace(src)
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	plain := write("plain", setConfig)
	sets := []string{"--set", "agents[llama-bpe].optimizer.lr=0.003", "--set", "agents[0].sampling.temperature=0.7"}

	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--set", "agents[0].optimizer.lr=abc"}, 1, `config ` + plain + `: --set agents[0].optimizer.lr=abc: cannot read "abc" as a number`},
		{[]string{"--set", "agents[2].optimizer.lr=1"}, 1, "--set agents[2].optimizer.lr=1: agents has 2 entries, agents[0] to agents[1]"},
		{[]string{"--set", "eval.evry=1"}, 1, "--set eval.evry=1: unknown key; valid keys here: at_start, every, sets; did you mean every?"},
		{[]string{"--set", "steps"}, 2, "--set steps: want KEY=VALUE"},
		{[]string{"--set", "steps=5", "--steps", "-1"}, 1, "--steps -1: must be >= 0, got -1"},
	} {
		_, stderr, code := runHacrl(t, append([]string{"train", plain, "--print-defaults"}, tt.args...)...)
		if code != tt.code || !strings.Contains(stderr, tt.want) {
			t.Errorf("train %q: exit %d, stderr:\n%s\nwant exit %d and %q", tt.args, code, stderr, tt.code, tt.want)
		}
	}

	// The same run three ways: overrides, the edited file, the file as it is.
	out := filepath.Join(dir, "plain")
	if _, stderr, code := runHacrl(t, append([]string{"train", plain}, sets...)...); code != 0 {
		t.Fatalf("train with --set: exit %d\n%s", code, stderr)
	}
	editedSrc := strings.Replace(setConfig, "    optimizer: {lr: 0.0001}\n    sampling: {max_new_tokens: 16}\n", "    optimizer: {lr: 0.0001}\n    sampling: {max_new_tokens: 16, temperature: 0.7}\n", 1)
	editedSrc = strings.Replace(editedSrc, "    template: {kind: chat}\n    optimizer: {lr: 0.0001}", "    template: {kind: chat}\n    optimizer: {lr: 0.003}", 1)
	edited := write("edited", editedSrc)
	if _, stderr, code := runHacrl(t, "train", edited); code != 0 {
		t.Fatalf("train the edited file: exit %d\n%s", code, stderr)
	}
	asIs := write("asis", setConfig)
	if _, stderr, code := runHacrl(t, "train", asIs); code != 0 {
		t.Fatalf("train the file as it is: exit %d\n%s", code, stderr)
	}
	got := stableMetrics(t, filepath.Join(out, metrics.FileName))
	if want := stableMetrics(t, filepath.Join(dir, "edited", metrics.FileName)); len(got) == 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("metrics with --set differ from the edited file's:\n%v\n%v", got, want)
	}
	if other := stableMetrics(t, filepath.Join(dir, "asis", metrics.FileName)); reflect.DeepEqual(got, other) {
		t.Error("metrics with --set are the file's as it is: the overrides changed nothing")
	}

	// OUT/config.yaml lists the flags and holds their values; it loads.
	data, err := os.ReadFile(filepath.Join(out, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	header := "# The config file with these overrides from the command line (their values are below):\n" +
		"#   --set 'agents[llama-bpe].optimizer.lr=0.003'\n#   --set 'agents[0].sampling.temperature=0.7'\n"
	if !strings.HasPrefix(string(data), header) {
		t.Errorf("OUT/config.yaml starts:\n%s\nwant:\n%s", data[:min(len(data), 300)], header)
	}
	rec, err := config.Load(filepath.Join(out, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Agents[1].Optimizer.LR != 0.003 || *rec.Agents[0].Sampling.Temperature != 0.7 || rec.Agents[0].Optimizer.LR != 0.0001 {
		t.Errorf("OUT/config.yaml: lr %g, %g, temperature %g", rec.Agents[0].Optimizer.LR, rec.Agents[1].Optimizer.LR, *rec.Agents[0].Sampling.Temperature)
	}

	// Resume: another value, or none, is refused; the same overrides go on.
	for _, args := range [][]string{
		{"--set", "agents[llama-bpe].optimizer.lr=0.002", "--set", "agents[0].sampling.temperature=0.7"},
		nil,
	} {
		_, stderr, code := runHacrl(t, append([]string{"train", plain, "--resume", "--steps", "3"}, args...)...)
		if code != 1 || !strings.Contains(stderr, "agents[1].optimizer.lr: checkpoint 0.003, config ") ||
			!strings.Contains(stderr, "(--set 'agents[1].optimizer.lr=0.003' matches the checkpoint)") {
			t.Errorf("resume with %q: exit %d\n%s\nwant it refused naming agents[1].optimizer.lr and its --set", args, code, stderr)
		}
	}
	if _, stderr, code := runHacrl(t, append([]string{"train", plain, "--resume", "--steps", "3"}, sets...)...); code != 0 {
		t.Fatalf("resume with the same overrides: exit %d\n%s", code, stderr)
	}
	if recs := stableMetrics(t, filepath.Join(out, metrics.FileName)); len(recs) <= len(got) {
		t.Errorf("the resumed run wrote no more metrics (%d records, had %d)", len(recs), len(got))
	}
}

// TestSetReachesAgentProcesses: train --processes gives its agent processes
// the same overrides, after the flags they share.
func TestSetReachesAgentProcesses(t *testing.T) {
	var o trainOverrides
	f := pflag.NewFlagSet("train", pflag.ContinueOnError)
	o.register(f, "")
	if err := f.Parse([]string{"--seed", "4", "--set", "steps=3", "--set", "eval.sets=[{name: t, split: test, problems: 2}]"}); err != nil {
		t.Fatal(err)
	}
	want := []string{"--seed=4", "--set=steps=3", "--set=eval.sets=[{name: t, split: test, problems: 2}]"}
	if got := o.args(f); !slices.Equal(got, want) {
		t.Errorf("agent arguments %q, want %q", got, want)
	}
}
