package model

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hacrl/hacrl/internal/npmtest"
	"github.com/hacrl/hacrl/internal/pyenv"
	"github.com/hacrl/hacrl/internal/shared"
	"github.com/hacrl/hacrl/safetensors"
)

// transformersTol bounds |hacrl − transformers| of a log-prob, both
// computing in float32 (a bfloat16 checkpoint's weights are read exactly).
const transformersTol = 1e-4

// transformersModel is a checkpoint transformers writes for
// TestTransformersCheckpoints: a published config.json with fewer layers
// and narrower widths (full vocabulary, every other field as published).
type transformersModel struct {
	name   string
	config string         // the published config.json
	edits  map[string]any // the fields changed
	tok    string         // npmtest model whose tokenizer.json tokenizes the texts ("": GPT-2's bytes)
}

var transformersModels = []transformersModel{
	{"gpt2", "testdata/gpt2-config.json", map[string]any{"n_layer": 2, "n_embd": 64, "n_head": 4}, ""},
	// head_dim 48 is not hidden/heads (32); llama3 rope_scaling as published.
	{"llama3.2", "../bench/configs/llama3.2-1b.json", map[string]any{"num_hidden_layers": 2, "hidden_size": 128,
		"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 48, "intermediate_size": 256}, "llama3"},
	// q/k/v biases; head_dim implicit (hidden/heads = 16).
	{"qwen2.5", "../bench/configs/qwen2.5-0.5b.json", map[string]any{"num_hidden_layers": 2, "hidden_size": 64,
		"num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128}, "qwen3"},
	// q/k norms, head_dim 32 (twice hidden/heads), tied and untied.
	{"qwen3", "../bench/configs/qwen3-0.6b.json", map[string]any{"num_hidden_layers": 2, "hidden_size": 64,
		"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 128}, "qwen3"},
	{"qwen3-untied", "../bench/configs/qwen3-0.6b.json", map[string]any{"num_hidden_layers": 2, "hidden_size": 64,
		"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 128,
		"tie_word_embeddings": false}, "qwen3"},
}

// benchmarkTexts returns n/2 GSM8K questions and n/2 MATH-500 problems.
func benchmarkTexts(t *testing.T, n int) []string {
	t.Helper()
	dir, err := shared.Benchmarks()
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, set := range []struct{ file, field string }{{"gsm8k/test.jsonl", "question"}, {"math500/test.jsonl", "problem"}} {
		data, err := os.ReadFile(filepath.Join(dir, set.file))
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		for i := 0; i < n/2; i++ {
			var rec map[string]any
			if err := dec.Decode(&rec); err != nil {
				t.Fatalf("%s record %d: %v", set.file, i+1, err)
			}
			s, ok := rec[set.field].(string)
			if !ok || s == "" {
				t.Fatalf("%s record %d: no %s", set.file, i+1, set.field)
			}
			texts = append(texts, s)
		}
	}
	return texts
}

// transformersRun is testdata/transformers_checkpoints.py's answer for one
// saved dtype.
type transformersRun struct {
	LogProbs      [][]float64 `json:"logprobs"`
	Continuations [][]int     `json:"continuations"`
	Margin        float64     `json:"margin"`
}

// Checkpoints that transformers' save_pretrained writes — random weights
// on the published configs of GPT-2, Llama-3.2-1B (llama3 rope_scaling, an
// explicit head_dim), Qwen2.5-0.5B (q/k/v biases) and Qwen3-0.6B (q/k
// norms; tied and untied), fewer layers and narrower widths but full
// vocabularies, in float32 (one file) and in bfloat16 (several shards) —
// load with Load and agree with transformers on the same files:
//
//   - per-token log-probs of 24 benchmark questions (GSM8K, MATH-500),
//     tokenized by the checkpoint's real tokenizer.json, within 1e-4, both
//     in float32;
//   - 32-token greedy continuations of 6 of them equal transformers'
//     generate, token for token, with the end tokens of the
//     generation_config.json save_pretrained writes. The weights are drawn
//     so that every greedy step of transformers has a top-2 logit margin
//     of at least 1e-3 (checked), so a near-tie cannot decide the test.
//
// The same files also check bench/torch/model.py (through hf_logprobs.py,
// which reads them without transformers): its log-probs equal
// transformers' within 1e-4, so benchmarks may use either as the PyTorch
// side.
func TestTransformersCheckpoints(t *testing.T) {
	pyenv.Python(t)
	npmDir := npmtest.Dir(t)
	ctx := context.Background()
	tmp := t.TempDir()
	const promptTokens, newTokens, greedyTexts, maxTokens = 16, 32, 6, 64
	texts := benchmarkTexts(t, 24)
	var specs []map[string]any
	for i, tm := range transformersModels {
		raw, err := os.ReadFile(tm.config)
		if err != nil {
			t.Fatal(err)
		}
		var cfg map[string]any
		if err := json.Unmarshal(raw, &cfg); err != nil {
			t.Fatalf("%s: %v", tm.config, err)
		}
		for k, v := range tm.edits {
			cfg[k] = v
		}
		spec := map[string]any{"name": tm.name, "config": cfg, "seed": 11 + i, "logit_std": 14,
			"f32": filepath.Join(tmp, tm.name, "f32"), "bf16": filepath.Join(tmp, tm.name, "bf16"), "max_shard_size": 4 << 20}
		if tm.tok != "" {
			spec["tokenizer"] = filepath.Join(npmtest.Model(npmDir, tm.tok), "tokenizer.json")
		}
		specs = append(specs, spec)
	}
	var res struct {
		Models []struct {
			Name string
			IDs  [][]int `json:"ids"`
			F32  transformersRun
			BF16 transformersRun
		}
	}
	pyenv.Run(t, "testdata/transformers_checkpoints.py", map[string]any{"texts": texts, "max_tokens": maxTokens,
		"prompt_tokens": promptTokens, "new_tokens": newTokens, "greedy_texts": greedyTexts, "models": specs}, &res)
	if len(res.Models) != len(transformersModels) {
		t.Fatalf("transformers_checkpoints.py: %d models, want %d", len(res.Models), len(transformersModels))
	}

	var jobs []map[string]any // for bench/torch/model.py
	var want [][][]float64
	for i, tm := range transformersModels {
		r := res.Models[i]
		for _, run := range []struct {
			dtype string
			res   transformersRun
		}{{"float32", r.F32}, {"bfloat16", r.BF16}} {
			dir := specs[i]["f32"].(string)
			if run.dtype == "bfloat16" {
				dir = specs[i]["bf16"].(string)
			}
			jobs, want = append(jobs, map[string]any{"dir": dir, "seqs": r.IDs}), append(want, run.res.LogProbs)
			t.Run(tm.name+"/"+run.dtype, func(t *testing.T) {
				checkTransformersCheckpoint(t, ctx, dir, run.dtype, r.IDs, run.res, promptTokens, newTokens)
			})
		}
	}

	t.Run("bench-torch", func(t *testing.T) {
		var got struct{ LogProbs [][][]float64 }
		pyenv.Run(t, "testdata/torchbench_logprobs.py", map[string]any{"jobs": jobs}, &got)
		if len(got.LogProbs) != len(jobs) {
			t.Fatalf("torchbench_logprobs.py: %d results for %d checkpoints", len(got.LogProbs), len(jobs))
		}
		for j, job := range jobs {
			if worst, i, k := logProbGap(got.LogProbs[j], want[j]); worst > transformersTol {
				t.Errorf("%s: bench/torch/model.py's log-prob of text %d token %d differs from transformers' by %.3g (largest allowed %g)",
					job["dir"], i, k, worst, transformersTol)
			}
		}
	})
}

// checkTransformersCheckpoint loads the checkpoint transformers saved in dir
// and holds its log-probs and greedy continuations to transformers'.
func checkTransformersCheckpoint(t *testing.T, ctx context.Context, dir, dtype string, ids [][]int, want transformersRun, promptTokens, newTokens int) {
	idx, err := safetensors.ReadIndex(filepath.Join(dir, WeightsIndexFile))
	if dtype == "bfloat16" && (err != nil || len(shardNames(idx)) < 2) {
		t.Errorf("transformers saved %s in %d shards (%v), want several", dir, len(shardNames(idx)), err)
	}
	m, err := Load(testBackend(t), dir)
	if err != nil {
		t.Fatalf("Load of transformers' checkpoint: %v", err)
	}
	if m.Config().DType != dtype {
		t.Errorf("Load read dtype %q, want %q", m.Config().DType, dtype)
	}
	seqs := make([]Sequence, len(ids))
	for i, x := range ids {
		if len(x) < 2 || i < len(want.Continuations) && len(x) < promptTokens {
			t.Fatalf("text %d has %d tokens", i, len(x))
		}
		seqs[i] = Sequence{Prompt: x[:1], Response: x[1:]}
	}
	got, err := m.Score(ctx, seqs, false)
	if err != nil {
		t.Fatal(err)
	}
	worst, i, k := logProbGap(float64s32(got.LogProbs), want.LogProbs)
	if worst > transformersTol {
		t.Errorf("log-prob of text %d token %d differs from transformers' by %.3g (largest allowed %g)", i, k, worst, transformersTol)
	}
	t.Logf("largest log-prob difference from transformers: %.3g over %d texts; greedy margin %.3g", worst, len(ids), want.Margin)

	// Greedy continuations: transformers' smallest top-2 margin must leave
	// no room for a near-tie, so that any difference is a real one.
	if want.Margin < 10*transformersTol {
		t.Fatalf("transformers' greedy steps have a top-2 margin of %.3g, under %g: draw weights with clearer margins", want.Margin, 10*transformersTol)
	}
	gen, err := LoadGenerationConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	prompts := make([][]int, len(want.Continuations))
	for i := range prompts {
		prompts[i] = ids[i][:promptTokens]
	}
	samples, err := m.Generate(ctx, prompts, SampleOptions{MaxNewTokens: newTokens, Greedy: true, Stop: gen.EOSTokenIDs}, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range samples {
		if !slices.Equal(s.Tokens, want.Continuations[i]) {
			t.Errorf("greedy continuation of text %d:\n hacrl        %v\n transformers %v", i, s.Tokens, want.Continuations[i])
		}
	}
}

// logProbGap returns the largest |got − want| and where it is (text, token
// index from 1); a shape mismatch is an infinite gap.
func logProbGap(got, want [][]float64) (worst float64, text, token int) {
	if len(got) != len(want) {
		return math.Inf(1), len(got), 0
	}
	for i := range got {
		if len(got[i]) != len(want[i]) {
			return math.Inf(1), i, len(got[i])
		}
		for j := range got[i] {
			if d := math.Abs(got[i][j] - want[i][j]); !(d <= worst) {
				worst, text, token = d, i, j+1
			}
		}
	}
	return worst, text, token
}

func float64s32(v [][]float32) [][]float64 {
	out := make([][]float64, len(v))
	for i, r := range v {
		out[i] = make([]float64, len(r))
		for j, x := range r {
			out[i][j] = float64(x)
		}
	}
	return out
}

func shardNames(idx safetensors.Index) []string {
	var names []string
	for _, f := range idx.WeightMap {
		if !slices.Contains(names, f) {
			names = append(names, f)
		}
	}
	return names
}
