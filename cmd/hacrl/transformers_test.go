package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/internal/hfstandin"
	"github.com/hacrl/hacrl/internal/npmtest"
	"github.com/hacrl/hacrl/internal/pyenv"
	"github.com/hacrl/hacrl/internal/shared"
	"github.com/hacrl/hacrl/model"
)

// transformersTol bounds |hacrl − transformers| of a log-prob, both in
// float32 (bfloat16 weights read exactly on both sides).
const transformersTol = 1e-4

// transformersResult is testdata/transformers_oracle.py's answer for one
// checkpoint.
type transformersResult struct {
	DType         string      `json:"dtype"`
	IDs           [][]int     `json:"ids"`
	PromptTokens  [][]int     `json:"prompt_tokens"`
	LogProbs      [][]float64 `json:"logprobs"`
	Continuations [][]int     `json:"continuations"`
	EOS           []int       `json:"eos"`
	Margin        float64     `json:"margin"`
}

// generated is what hacrl generate --json prints for one prompt.
type generated struct {
	PromptIDs   []int  `json:"prompt_ids"`
	ResponseIDs []int  `json:"response_ids"`
	Stop        string `json:"stop"`
}

// hacrlGenerate runs hacrl generate greedily on the raw prompts.
func hacrlGenerate(t *testing.T, dir string, prompts []string, newTokens int) []generated {
	t.Helper()
	args := append([]string{"generate", dir, "--raw", "--json", "--max-new-tokens", fmt.Sprint(newTokens)}, prompts...)
	stdout, stderr, code := runHacrl(t, args...)
	if code != 0 {
		t.Fatalf("hacrl generate %s: exit status %d: %s", dir, code, stderr)
	}
	var out []generated
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var g generated
		if err := json.Unmarshal([]byte(line), &g); err != nil {
			t.Fatalf("hacrl generate: %q: %v", line, err)
		}
		out = append(out, g)
	}
	if len(out) != len(prompts) {
		t.Fatalf("hacrl generate: %d responses for %d prompts", len(out), len(prompts))
	}
	return out
}

// What hacrl writes loads in transformers and computes what hacrl
// computes. Bases in the published layouts — Qwen3-0.6B (q/k norms; tied,
// and untied) and Llama-3.2-1B-Instruct (llama3 rope_scaling, explicit head_dim) in
// sharded bfloat16, Qwen2.5-0.5B (q/k/v biases) in float32, written by
// transformers' save_pretrained with random weights of clear greedy
// margins, full vocabularies and the real tokenizers; and the shipped
// GPT-2 agent — are trained one step by a real `hacrl train` run (full
// fine-tuning, and a LoRA agent merged with `hacrl merge`, in the base's
// bfloat16 and with --dtype float32). Each checkpoint hacrl wrote
// (OUT/final/<agent>, the merges) loads with AutoTokenizer and
// AutoModelForCausalLM.from_pretrained, and:
//
//   - the log-probs transformers gives 24 benchmark texts, tokenized by
//     AutoTokenizer, equal hacrl score's of the same ids within 1e-4;
//   - AutoTokenizer tokenizes each prompt as hacrl generate --raw does;
//   - transformers' greedy generate continues each prompt with hacrl
//     generate's tokens and stops where hacrl stops: on the end tokens of
//     the generation_config.json hacrl wrote. Each base's list of end
//     tokens gets one token its greedy continuation reaches, so that the
//     stop is exercised; transformers' smallest top-2 margin is checked to
//     be over 1e-3, so a near-tie cannot decide the comparison.
func TestTransformersLoadsHacrl(t *testing.T) {
	pyenv.Python(t)
	npmDir := npmtest.Dir(t)
	tmp := t.TempDir()
	const newTokens, maxTokens = 32, 64
	texts, prompts := transformersTexts(t)

	// The bases: written by transformers, with the published
	// generation_config.json and the real tokenizer files.
	type base struct {
		name, dir, config, gen, tok, dtype string
		edits                              map[string]any
	}
	qwen3Cfg := filepath.Join("..", "..", "internal", "hfstandin", "testdata", hfstandin.Qwen3_0_6B)
	llamaCfg := filepath.Join("..", "..", "internal", "hfstandin", "testdata", hfstandin.Llama3_2_1BInstruct)
	bases := []base{
		{"qwen3", "", filepath.Join(qwen3Cfg, "config.json"), filepath.Join(qwen3Cfg, "generation_config.json"), "qwen3", "bfloat16",
			map[string]any{"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 128}},
		{"llama3.2", "", filepath.Join(llamaCfg, "config.json"), filepath.Join(llamaCfg, "generation_config.json"), "llama3", "bfloat16",
			map[string]any{"num_hidden_layers": 2, "hidden_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 48, "intermediate_size": 256}},
		{"qwen3-untied", "", filepath.Join(qwen3Cfg, "config.json"), filepath.Join(qwen3Cfg, "generation_config.json"), "qwen3", "bfloat16",
			map[string]any{"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 128,
				"tie_word_embeddings": false}},
		{"qwen2.5", "", filepath.Join("..", "..", "bench", "configs", "qwen2.5-0.5b.json"), "", "qwen3", "float32",
			map[string]any{"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128}},
	}
	var makes []map[string]any
	for i := range bases {
		b := &bases[i]
		b.dir = filepath.Join(tmp, "base", b.name)
		var cfg map[string]any
		if err := json.Unmarshal(must(os.ReadFile(b.config)), &cfg); err != nil {
			t.Fatal(err)
		}
		for k, v := range b.edits {
			cfg[k] = v
		}
		makes = append(makes, map[string]any{"config": cfg, "seed": 21 + i, "logit_std": 14, "dtype": b.dtype, "max_shard_size": 4 << 20, "out": b.dir})
	}
	pyenv.Run(t, "testdata/transformers_oracle.py", map[string]any{"make": makes}, nil)
	for _, b := range bases {
		gen := []byte(`{"bos_token_id": 151643, "eos_token_id": 151643}`) // Qwen2.5-0.5B's published end token
		if b.gen != "" {
			gen = must(os.ReadFile(b.gen))
		}
		files := map[string][]byte{model.GenerationConfigFile: gen}
		for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
			files[f] = must(os.ReadFile(filepath.Join(npmtest.Model(npmDir, b.tok), f)))
		}
		for f, data := range files {
			if err := os.WriteFile(filepath.Join(b.dir, f), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	gpt := filepath.Join(tmp, "base", "gpt")
	if err := os.CopyFS(gpt, os.DirFS(lookAgents[0])); err != nil {
		t.Fatal(err)
	}
	bases = append(bases, base{name: "gpt", dir: gpt})

	// One end token each base's greedy continuation of the first prompt
	// reaches, added to its generation_config.json's list.
	for _, b := range bases {
		g := hacrlGenerate(t, b.dir, prompts[:1], newTokens)[0]
		if len(g.ResponseIDs) < 6 {
			t.Fatalf("%s: greedy continuation %v is too short to pick an end token from", b.name, g.ResponseIDs)
		}
		addEndToken(t, b.dir, g.ResponseIDs[5])
	}

	// A real run: full fine-tuning of every base, and a LoRA agent.
	var agents strings.Builder
	for _, b := range bases {
		fmt.Fprintf(&agents, "  - {name: %s, checkpoint: %s, optimizer: {lr: 1.0e-5}, sampling: {max_new_tokens: 6}}\n", b.name, b.dir)
	}
	fmt.Fprintf(&agents, "  - {name: qwen3-lora, checkpoint: %s, lora: {rank: 8}, optimizer: {lr: 1.0e-4}, sampling: {max_new_tokens: 6}}\n", bases[0].dir)
	out := trainOneStep(t, tmp, "transformers-oracle", 5, agents.String())
	checkpoints := map[string]string{}
	for _, b := range bases {
		checkpoints["final/"+b.name] = filepath.Join(out, "final", b.name)
	}
	for _, dtype := range []string{"", "float32"} {
		dir := filepath.Join(tmp, "merged"+dtype)
		args := []string{"merge", "--adapter", filepath.Join(out, "final", "qwen3-lora"), "--out", dir}
		if dtype != "" {
			args = append(args, "--dtype", dtype)
		}
		if _, stderr, code := runHacrl(t, args...); code != 0 {
			t.Fatalf("hacrl %v: exit status %d: %s", args, code, stderr)
		}
		checkpoints["merge "+dtype] = dir
	}
	wantDType := map[string]string{"final/qwen3": "bfloat16", "final/qwen3-untied": "bfloat16", "final/llama3.2": "bfloat16", "final/qwen2.5": "float32",
		"final/gpt": "float32", "merge ": "bfloat16", "merge float32": "float32"}

	names := slices.Sorted(func(yield func(string) bool) {
		for k := range checkpoints {
			if !yield(k) {
				return
			}
		}
	})
	gens := map[string][]generated{}
	var jobs []map[string]any
	for _, name := range names {
		g := hacrlGenerate(t, checkpoints[name], prompts, newTokens)
		gens[name] = g
		var ids [][]int
		for _, x := range g {
			ids = append(ids, x.PromptIDs)
		}
		jobs = append(jobs, map[string]any{"dir": checkpoints[name], "texts": texts, "max_tokens": maxTokens,
			"prompts": prompts, "prompt_ids": ids, "new_tokens": newTokens})
	}
	var res struct{ Results []transformersResult }
	pyenv.Run(t, "testdata/transformers_oracle.py", map[string]any{"jobs": jobs}, &res)
	if len(res.Results) != len(jobs) {
		t.Fatalf("transformers_oracle.py: %d results for %d checkpoints", len(res.Results), len(jobs))
	}
	for i, name := range names {
		r, dir := res.Results[i], checkpoints[name]
		t.Run(strings.ReplaceAll(strings.TrimSpace(name), " ", "-"), func(t *testing.T) {
			if r.DType != wantDType[name] {
				t.Errorf("transformers reads %s as %s, want %s", dir, r.DType, wantDType[name])
			}
			var seqs []peftSeq
			for _, x := range r.IDs {
				seqs = append(seqs, peftSeq{Prompt: x[:1], Response: x[1:]})
			}
			got := hacrlScore(t, scoreFile(t, t.TempDir(), "texts", seqs), dir)
			d, ok := closeTo(got, r.LogProbs, transformersTol)
			if !ok {
				t.Errorf("hacrl score and transformers differ by up to %.3g in log-prob (largest allowed %g)", d, transformersTol)
			}
			t.Logf("largest log-prob difference %.3g over %d texts; greedy margin %.3g; end tokens %v", d, len(seqs), r.Margin, r.EOS)
			if r.Margin < 10*transformersTol {
				t.Fatalf("transformers' greedy steps have a top-2 margin of %.3g, under %g: draw weights with clearer margins", r.Margin, 10*transformersTol)
			}
			stopped := 0
			for j, g := range gens[name] {
				if !slices.Equal(r.PromptTokens[j], g.PromptIDs) {
					t.Errorf("prompt %d: AutoTokenizer gives %v, hacrl generate %v", j, r.PromptTokens[j], g.PromptIDs)
				}
				if !slices.Equal(g.ResponseIDs, r.Continuations[j]) {
					t.Errorf("greedy continuation of prompt %d:\n hacrl generate (%s) %v\n transformers          %v", j, g.Stop, g.ResponseIDs, r.Continuations[j])
				}
				if g.Stop == "eos" {
					stopped++
				}
			}
			if stopped == 0 {
				t.Errorf("no greedy continuation reached an end token (%v): the stop is not exercised", r.EOS)
			}
		})
	}
}

// transformersTexts returns 24 benchmark texts (GSM8K questions and
// MATH-500 problems) and 6 prompts: the first six cut at their last
// space within 30 bytes.
func transformersTexts(t *testing.T) (texts, prompts []string) {
	t.Helper()
	dir, err := shared.Benchmarks()
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range []struct{ file, field string }{{"gsm8k/test.jsonl", "question"}, {"math500/test.jsonl", "problem"}} {
		lines := strings.SplitN(string(must(os.ReadFile(filepath.Join(dir, set.file)))), "\n", 13)
		for i, line := range lines[:12] {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("%s line %d: %v", set.file, i+1, err)
			}
			s, _ := rec[set.field].(string)
			if s == "" {
				t.Fatalf("%s line %d: no %s", set.file, i+1, set.field)
			}
			texts = append(texts, s)
		}
	}
	for _, s := range texts[:6] {
		// Whole words (and runes); short enough for the GPT-2 agent's
		// 64-token context to hold the 32 new tokens.
		cut := strings.LastIndexByte(s[:30], ' ')
		prompts = append(prompts, s[:cut])
	}
	return texts, prompts
}

// addEndToken appends id to the eos_token_id of dir's
// generation_config.json (written from config.json's when it has none).
func addEndToken(t *testing.T, dir string, id int) {
	t.Helper()
	path := filepath.Join(dir, model.GenerationConfigFile)
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		data, err = os.ReadFile(filepath.Join(dir, model.ConfigFile))
	}
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var eos []any
	switch v := cfg["eos_token_id"].(type) {
	case []any:
		eos = v
	case float64:
		eos = []any{v}
	}
	gen := map[string]any{"eos_token_id": append(eos, id)}
	if bos, ok := cfg["bos_token_id"]; ok {
		gen["bos_token_id"] = bos
	}
	for k, v := range cfg {
		if _, isModel := map[string]bool{"eos_token_id": true, "bos_token_id": true}[k]; !isModel && !strings.Contains(string(data), `"model_type"`) {
			gen[k] = v
		}
	}
	if err := os.WriteFile(path, must(json.MarshalIndent(gen, "", "  ")), 0o644); err != nil {
		t.Fatal(err)
	}
}
