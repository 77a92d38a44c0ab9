package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/rollout"
	"github.com/hacrl/hacrl/train"
)

// logRun trains two example agents for two steps with every step's rollouts
// logged and returns the run directory.
func logRun(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "run")
	cfgPath := filepath.Join(dir, "run.yaml")
	src := fmt.Sprintf(`
seed: 5
out: %s
steps: 2
method: {name: hacpo}
task: {name: arith, digits: 2, operators: "+-"}
batch: {prompts_per_step: 2, responses_per_prompt: 2, mini_batch: 4}
backend: go:ops_sequential
rollouts: {every: 1}
agents:
  - {name: gpt-char, checkpoint: ../../examples/agents/gpt-char, optimizer: {lr: 0.0001}, sampling: {max_new_tokens: 40}}
  - {name: llama-bpe, checkpoint: ../../examples/agents/llama-bpe, template: {kind: chat}, optimizer: {lr: 0.0001}, sampling: {max_new_tokens: 32}}
`, out)
	if err := os.WriteFile(cfgPath, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	run, err := train.New(context.Background(), cfg, train.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	return out
}

// rollouts runs `hacrl rollouts args...` and returns its stdout.
func rollouts(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := rolloutsCmd()
	var stdout, stderr bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.Execute()
	return stdout.String(), err
}

// jsonLines parses stdout as JSON records, one per line, failing on anything else.
func jsonLines(t *testing.T, stdout string) []rollout.Record {
	t.Helper()
	var recs []rollout.Record
	for i, l := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		if l == "" {
			continue
		}
		var r rollout.Record
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("stdout line %d is not a JSON record: %v\n%s", i+1, err, l)
		}
		recs = append(recs, r)
	}
	return recs
}

func TestRolloutsCommand(t *testing.T) {
	out := logRun(t)
	want, err := rollout.ReadLog(rollout.LogPath(out, 2))
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 2*2*2 {
		t.Fatalf("step 2 has %d records, want 2 agents × 2 prompts × 2 responses", len(want))
	}

	// Without --step: the logged steps.
	stdout, err := rollouts(t, out)
	if err != nil || !strings.Contains(stdout, "2 logged steps") || !strings.Contains(stdout, "step-00000001.jsonl.gz") || !strings.Contains(stdout, "step-00000002.jsonl.gz") {
		t.Errorf("listing (%v):\n%s", err, stdout)
	}
	stdout, err = rollouts(t, out, "--json")
	var list struct{ Steps []int }
	if err != nil || json.Unmarshal([]byte(stdout), &list) != nil || !reflect.DeepEqual(list.Steps, []int{1, 2}) {
		t.Errorf("listing as JSON (%v): %q", err, stdout)
	}

	// --json: the file's records, and nothing else.
	stdout, err = rollouts(t, out, "--step", "2", "--json")
	if err != nil {
		t.Fatal(err)
	}
	if got := jsonLines(t, stdout); !reflect.DeepEqual(got, want) {
		t.Errorf("--json printed\n%+v\nwant\n%+v", got, want)
	}
	stdout, _ = rollouts(t, out, "--step", "2", "--json", "--agent", "llama-bpe", "--limit", "1")
	got := jsonLines(t, stdout)
	if len(got) != 2 {
		t.Errorf("--agent llama-bpe --limit 1: %d records, want 2", len(got))
	}
	for _, r := range got {
		if r.Agent != "llama-bpe" || r.Prompt != 0 {
			t.Errorf("--agent llama-bpe --limit 1 printed a record of %s for prompt %d", r.Agent, r.Prompt)
		}
	}

	// Text: every prompt's question, every response, every learner's row.
	stdout, err = rollouts(t, out, "--step", "2")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(stdout, "\n--- "); n != len(want) {
		t.Errorf("%d responses printed, want %d:\n%s", n, len(want), stdout)
	}
	if n := strings.Count(stdout, "\n=== prompt "); n != 2 {
		t.Errorf("%d prompts printed, want 2", n)
	}
	for _, r := range want {
		head := fmt.Sprintf("--- %s, response %d of 2: reward %.3f · %d tokens · ", r.Agent, r.Sample+1, r.Reward, r.Tokens)
		if !strings.Contains(stdout, "question: "+r.Question) || !strings.Contains(stdout, head) || !strings.Contains(stdout, strings.SplitN(r.Response, "\n", 2)[0]) {
			t.Errorf("text lacks %q, its question or its response:\n%s", head, stdout)
		}
		for _, u := range r.Learners {
			row := fmt.Sprintf("%+.4f", u.Advantage)
			if !strings.Contains(stdout, row) {
				t.Errorf("text lacks learner %s's advantage %s", u.Learner, row)
			}
		}
	}
	if strings.Contains(stdout, "<|im_start|>") {
		t.Errorf("prompts printed without --prompts")
	}
	stdout, _ = rollouts(t, out, "--step", "2", "--prompts", "--learner", "llama-bpe")
	if !strings.Contains(stdout, "llama-bpe's prompt:\n    <|im_start|>user") || strings.Contains(stdout, "gpt-char (self)") || !strings.Contains(stdout, "llama-bpe (self)") {
		t.Errorf("--prompts --learner llama-bpe:\n%s", stdout)
	}

	// Errors name what is wrong: the step, the agent, the file and the line.
	bad := filepath.Join(out, rollout.LogDir, "step-00000003.jsonl.gz")
	os.WriteFile(bad, []byte("not gzip"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{out, "--step", "9"}, "no rollout log for step 9 in " + filepath.Join(out, rollout.LogDir) + "; logged steps: 1, 2, 3"},
		{[]string{out, "--step", "0"}, "--step: steps count from 1, got 0"},
		{[]string{out, "--step", "2", "--agent", "nobody"}, `--agent: no agent "nobody" in step 2 (agents: gpt-char, llama-bpe)`},
		{[]string{out, "--step", "2", "--learner", "nobody"}, `--learner: no learner "nobody"`},
		{[]string{out, "--step", "2", "--limit", "-1"}, "--limit: must be >= 0"},
		{[]string{out, "--step", "3"}, "rollout log " + bad + ": not a gzip file"},
		{[]string{filepath.Join(out, "nothing")}, "run directory: "},
		{[]string{filepath.Join(out, "final")}, "no rollout logs in " + filepath.Join(out, "final", rollout.LogDir)},
	} {
		stdout, err := rollouts(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("rollouts %v: error %v, want one containing %q", tc.args, err, tc.want)
		}
		if stdout != "" {
			t.Errorf("rollouts %v failed but printed %q", tc.args, stdout)
		}
		// A flag value out of range is a usage error (exit status 2).
		if isUsage := errors.As(err, &usageErr{}); isUsage != (strings.Contains(tc.want, "--step:") || strings.Contains(tc.want, "--limit:")) {
			t.Errorf("rollouts %v: usage error %v, want one only for --step and --limit out of range", tc.args, isUsage)
		}
	}
	// A bad line in the middle: the file and the line number.
	recs := slices.Clone(want[:3])
	for i := range recs {
		recs[i].Step = 3
	}
	if err := rollout.WriteLog(bad, recs); err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(gunzip(t, bad), "\n")
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write([]byte(lines[0] + "{\"step\": 3,\n" + lines[2]))
	zw.Close()
	if err := os.WriteFile(bad, z.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if stdout, err := rollouts(t, out, "--step", "3", "--json"); err == nil || !strings.Contains(err.Error(), "rollout log "+bad+": line 2: not a rollout record") || stdout != "" {
		t.Errorf("a bad line: error %v, stdout %q", err, stdout)
	}
	if stdout, err := rollouts(t, out, "--step", "3", "--limit", "1", "--json"); err == nil || stdout != "" {
		t.Errorf("a bad line after the limit: error %v, stdout %q; the whole file is checked", err, stdout)
	}
}

func gunzip(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	text, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(text)
}
