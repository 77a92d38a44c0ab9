// Package realsmall_test keeps examples/real-small from rotting: it runs
// make-agents.sh at a tiny scale (one sft step per agent) and then one step
// of hacpo.yaml and of the beyond.yaml grid's decoupled cell with the agents
// it made.
package realsmall_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/experiment"
	"github.com/hacrl/hacrl/internal/npmtest"
	"github.com/hacrl/hacrl/train"
)

func TestMakeAgentsAndHACPOStep(t *testing.T) {
	if testing.Short() {
		t.Skip("builds hacrl and trains two models with real vocabularies")
	}
	npmtest.Dir(t) // the pinned tokenizer packages, or a skip with HACRL_SKIP_NPM=1
	t.Chdir("../..")
	tmp := t.TempDir()
	agents := filepath.Join(tmp, "agents")

	cmd := exec.Command("examples/real-small/make-agents.sh", agents, "--steps", "1", "--eval-problems", "2")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make-agents.sh: %v\n%s", err, out)
	}
	// The script made the architectures the example promises.
	for _, tc := range []struct {
		name string
		want map[string]any
	}{
		{"qwen3-small", map[string]any{"model_type": "qwen3", "head_dim": 32.0, "hidden_size": 64.0, "tie_word_embeddings": true, "vocab_size": 151669.0}},
		{"llama3-small", map[string]any{"model_type": "llama", "tie_word_embeddings": true, "vocab_size": 128256.0,
			"rope_scaling": map[string]any{"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192.0}}},
	} {
		dir := filepath.Join(agents, tc.name)
		var got map[string]any
		data, err := os.ReadFile(filepath.Join(dir, "config.json"))
		if err == nil {
			err = json.Unmarshal(data, &got)
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for k, v := range tc.want {
			if g, _ := json.Marshal(got[k]); string(g) != mustJSON(t, v) {
				t.Errorf("%s config.json %s = %s, want %s", tc.name, k, g, mustJSON(t, v))
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "tokenizer_config.json")); err != nil {
			t.Errorf("%s: the hf template's tokenizer_config.json was not saved: %v", tc.name, err)
		}
	}

	cfg, err := config.Load("examples/real-small/hacpo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	metrics := trainOneStep(t, cfg, filepath.Join(tmp, "hacpo"), agents)
	// Each learner reports how the other's text survives its tokenizer, and
	// the ω it weighs it with.
	seen := map[string]bool{}
	for _, rec := range metrics {
		agent, _ := rec["agent"].(string)
		for k, v := range rec {
			if strings.HasPrefix(k, "retokenize/changed_frac") || strings.HasPrefix(k, "omega/") {
				x, ok := v.(float64)
				if !ok || (strings.HasPrefix(k, "retokenize/") && (x < 0 || x > 1)) {
					t.Errorf("%s %s = %v", agent, k, v)
				}
				seen[agent+" "+k] = true
			}
		}
	}
	for _, k := range []string{
		"qwen3-small retokenize/changed_frac", "qwen3-small retokenize/changed_frac/llama3-small", "qwen3-small omega/llama3-small",
		"llama3-small retokenize/changed_frac", "llama3-small retokenize/changed_frac/qwen3-small", "llama3-small omega/qwen3-small",
	} {
		if !seen[k] {
			t.Errorf("metrics.jsonl has no %s", k)
		}
	}

	// The beyond-HACPO grid's cells run on the same agents: its decoupled
	// cell, the variant that also scores every cross sample with the
	// learner's start-of-step weights, across the two tokenizers.
	grid, err := experiment.Load("examples/real-small/beyond.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cell *experiment.Cell
	for _, c := range grid.Cells() {
		if c.Method == "hacpo-decoupled" {
			cell = &c
			break
		}
	}
	if cell == nil {
		t.Fatal("beyond.yaml has no hacpo-decoupled cell")
	}
	cfg, err = cell.RunConfig(grid)
	if err != nil {
		t.Fatal(err)
	}
	seen = map[string]bool{}
	for _, rec := range trainOneStep(t, cfg, filepath.Join(tmp, "decoupled"), agents) {
		agent, _ := rec["agent"].(string)
		for k, v := range rec {
			if x, ok := v.(float64); ok && strings.HasPrefix(k, "cross/start_ratio_p50/") && x > 0 {
				seen[agent+" "+k] = true
			}
		}
	}
	for _, k := range []string{"qwen3-small cross/start_ratio_p50/llama3-small", "llama3-small cross/start_ratio_p50/qwen3-small"} {
		if !seen[k] {
			t.Errorf("the decoupled cell's metrics have no positive %s", k)
		}
	}
}

// trainOneStep trains cfg for one step at a tiny scale, on the agents in
// agentsDir, and returns the metrics.jsonl records.
func trainOneStep(t *testing.T, cfg *config.Config, out, agentsDir string) []map[string]any {
	t.Helper()
	cfg.Out = out
	cfg.Steps = 1
	cfg.Batch = config.Batch{PromptsPerStep: 2, ResponsesPerPrompt: 2, MiniBatch: 4, MicroBatch: 4}
	cfg.Eval.Every = 1
	cfg.Eval.Sets[0].Problems, cfg.Eval.Sets[0].Samples = 2, 1
	for i := range cfg.Agents {
		cfg.Agents[i].Checkpoint = filepath.Join(agentsDir, cfg.Agents[i].Name)
		cfg.Agents[i].Sampling.MaxNewTokens = 8
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	run, err := train.New(context.Background(), cfg, train.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	sum, err := run.Train(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sum.Steps != 1 || len(sum.First) != 2 || len(sum.Last) != 2 {
		t.Errorf("summary %+v, want 1 step and a first and last evaluation of both agents", sum)
	}
	f, err := os.Open(filepath.Join(cfg.Out, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return recs
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
