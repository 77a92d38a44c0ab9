// Package hfstandin writes random-weight stand-ins of published Hugging Face
// checkpoints — Qwen/Qwen3-0.6B and meta-llama/Llama-3.2-1B-Instruct — for
// tests that must run the whole path of a real model (loading, chat
// templates, end tokens, re-tokenization, training, saving) where the real
// weights cannot be downloaded.
//
// A stand-in directory has the published layout: the model's own
// config.json (the published file, with only the size fields a Spec
// changes), bfloat16 weights sharded with model.safetensors.index.json,
// the published generation_config.json (its eos_token_id list), and the
// real tokenizer.json and tokenizer_config.json (chat template) copied from
// a directory the caller gives (in tests: internal/npmtest.Model). Every
// other feature of the published config is kept: the full vocabulary,
// head_dim, grouped-query attention, rope_theta, Llama 3's rope_scaling,
// tied embeddings, the norm epsilon.
package hfstandin

import (
	"embed"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/gomlx/compute"
	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/safetensors"
	"github.com/hacrl/hacrl/tokenizer"
)

// published holds the config.json and generation_config.json of each
// model, as published on the Hugging Face Hub.
//
//go:embed testdata
var published embed.FS

// The published models a Spec can stand in for.
const (
	Qwen3_0_6B          = "Qwen3-0.6B"
	Llama3_2_1BInstruct = "Llama-3.2-1B-Instruct"
)

// Spec is a stand-in: which model, and the sizes it changes. A zero size
// keeps the published value.
type Spec struct {
	Model        string // Qwen3_0_6B or Llama3_2_1BInstruct
	Layers       int    // num_hidden_layers
	Hidden       int    // hidden_size
	Heads        int    // num_attention_heads
	KVHeads      int    // num_key_value_heads
	HeadDim      int    // head_dim
	Intermediate int    // intermediate_size
	// MaxShardSize is the largest weight shard in bytes (0: 5 GB).
	MaxShardSize int64
	Seed         int64 // draws the random weights
}

// Small returns a stand-in of the named model that trains in seconds on a
// CPU: two layers and narrow widths, with every published feature kept —
// Qwen3's head_dim twice hidden/heads and its 2:1 grouped-query attention,
// Llama 3.2's 4:1 grouped-query attention and explicit head_dim, both
// vocabularies in full — sharded into shards of about 8 MB.
func Small(name string, seed int64) Spec {
	s := Spec{Model: name, Layers: 2, MaxShardSize: 8 << 20, Seed: seed}
	switch name {
	case Qwen3_0_6B: // published: 1024 wide, 16 heads (8 KV) of 128, MLP 3072
		s.Hidden, s.Heads, s.KVHeads, s.HeadDim, s.Intermediate = 64, 4, 2, 32, 192
	case Llama3_2_1BInstruct: // published: 2048 wide, 32 heads (8 KV) of 64, MLP 8192
		s.Hidden, s.Heads, s.KVHeads, s.HeadDim, s.Intermediate = 128, 8, 2, 16, 512
	}
	return s
}

// Published returns the published file name (config.json or
// generation_config.json) of the named model.
func Published(name, file string) ([]byte, error) {
	data, err := published.ReadFile("testdata/" + name + "/" + file)
	if err != nil {
		return nil, fmt.Errorf("hfstandin: no published %s of %q (known: %s, %s)", file, name, Qwen3_0_6B, Llama3_2_1BInstruct)
	}
	return data, nil
}

// Write writes the stand-in s into dir (created if needed), with the
// tokenizer.json and tokenizer_config.json of tokDir. b is the backend the
// random model is built on.
func Write(b compute.Backend, dir, tokDir string, s Spec) error {
	raw, err := Published(s.Model, model.ConfigFile)
	if err != nil {
		return err
	}
	gen, err := Published(s.Model, model.GenerationConfigFile)
	if err != nil {
		return err
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return fmt.Errorf("hfstandin: %s config.json: %w", s.Model, err)
	}
	for key, v := range map[string]int{"num_hidden_layers": s.Layers, "hidden_size": s.Hidden,
		"num_attention_heads": s.Heads, "num_key_value_heads": s.KVHeads, "head_dim": s.HeadDim,
		"intermediate_size": s.Intermediate} {
		if v != 0 {
			cfg[key] = v
		}
	}
	edited, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("hfstandin: %w", err)
	}
	cfgPath := filepath.Join(dir, model.ConfigFile)
	if err := os.WriteFile(cfgPath, edited, 0o644); err != nil {
		return fmt.Errorf("hfstandin: %w", err)
	}
	mc, err := model.ReadConfig(cfgPath)
	if err != nil {
		return fmt.Errorf("hfstandin: %s: %w", s.Model, err)
	}
	m, err := model.New(b, mc, s.Seed)
	if err != nil {
		return fmt.Errorf("hfstandin: %s: %w", s.Model, err)
	}
	if err := m.SaveWith(dir, model.SaveOptions{DType: "bfloat16", MaxShardSize: s.MaxShardSize}); err != nil {
		return fmt.Errorf("hfstandin: %s: %w", s.Model, err)
	}
	// The published files, not hacrl's rendering of them: config.json keeps
	// every published field (architectures, max_window_layers, ...).
	files := map[string][]byte{model.ConfigFile: edited, model.GenerationConfigFile: gen}
	for _, f := range []string{"tokenizer.json", tokenizer.ConfigFile} {
		data, err := os.ReadFile(filepath.Join(tokDir, f))
		if err != nil {
			return fmt.Errorf("hfstandin: %w", err)
		}
		files[f] = data
	}
	for f, data := range files {
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			return fmt.Errorf("hfstandin: %w", err)
		}
	}
	return nil
}

// Layout is how a checkpoint directory stores its weights.
type Layout struct {
	Shards  []string       // the weight files the index names, sorted, without repeats
	DTypes  map[string]int // tensors per safetensors dtype ("BF16": 23)
	Tensors int            // tensors in the index
}

// ReadLayout reads dir/model.safetensors.index.json and the header of every
// shard it names, checking that each tensor the index places in a shard is
// there.
func ReadLayout(dir string) (Layout, error) {
	idx, err := safetensors.ReadIndex(filepath.Join(dir, model.WeightsIndexFile))
	if err != nil {
		return Layout{}, err
	}
	l := Layout{DTypes: map[string]int{}, Tensors: len(idx.WeightMap)}
	byShard := map[string][]string{}
	for name, shard := range idx.WeightMap {
		byShard[shard] = append(byShard[shard], name)
	}
	for shard, names := range byShard {
		l.Shards = append(l.Shards, shard)
		f, err := safetensors.Open(filepath.Join(dir, shard))
		if err != nil {
			return Layout{}, err
		}
		for _, n := range names {
			dtype, _, ok := f.Info(n)
			if !ok {
				f.Close()
				return Layout{}, fmt.Errorf("hfstandin: %s: the index places %s in %s, which lacks it", dir, n, shard)
			}
			l.DTypes[dtype]++
		}
		f.Close()
	}
	slices.Sort(l.Shards)
	return l, nil
}
