// Command standin writes a random-weight agent of a published architecture
// in the Hugging Face layout, for benchmarks at real shapes where the real
// weights are not needed (or cannot be downloaded):
//
//	go run ./bench/standin --config bench/configs/qwen2.5-0.5b.json --tokenizer DIR --out OUT [--layers N] [--small]
//
// OUT gets the config.json given (with num_hidden_layers replaced by
// --layers, and with --small the widths of a model that trains in seconds,
// the vocabulary kept), weights drawn as hacrl initialises a new model and
// saved in the config's torch_dtype, a generation_config.json with the
// config's bos and eos token ids, and the tokenizer.json and
// tokenizer_config.json (chat template) of DIR. internal/hfstandin does the
// same for the tests from the published files it embeds; this takes any
// config.json (bench/configs) so that Qwen2.5 shapes are covered too.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/tokenizer"
)

func main() {
	cfgPath := flag.String("config", "", "a Hugging Face config.json (llama, qwen2 or qwen3)")
	tokDir := flag.String("tokenizer", "", "a directory with tokenizer.json and tokenizer_config.json")
	out := flag.String("out", "", "the agent directory to write (created; must not exist)")
	layers := flag.Int("layers", 0, "num_hidden_layers; 0: the config's")
	small := flag.Bool("small", false, "narrow widths (hidden 64, 4 heads of 32, 2 KV heads, MLP 192), the vocabulary kept")
	seed := flag.Int64("seed", 1, "draws the random weights")
	flag.Parse()
	if *cfgPath == "" || *tokDir == "" || *out == "" || flag.NArg() > 0 || *layers < 0 {
		fmt.Fprintln(os.Stderr, "usage: standin --config CONFIG.json --tokenizer DIR --out DIR [--layers N] [--small] [--seed S]")
		os.Exit(2)
	}
	if err := write(*cfgPath, *tokDir, *out, *layers, *small, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "standin:", err)
		os.Exit(1)
	}
}

// write builds the agent in a temporary directory beside out and renames it
// into place, so that out is either complete or absent.
func write(cfgPath, tokDir, out string, layers int, small bool, seed int64) error {
	if _, err := os.Stat(out); err == nil {
		return fmt.Errorf("%s exists; remove it first", out)
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		return err
	}
	var hf map[string]any
	if err := json.Unmarshal(raw, &hf); err != nil {
		return fmt.Errorf("%s: %w", cfgPath, err)
	}
	if layers > 0 {
		hf["num_hidden_layers"] = layers
	}
	if small {
		hf["hidden_size"], hf["num_attention_heads"], hf["num_key_value_heads"] = 64, 4, 2
		hf["head_dim"], hf["intermediate_size"] = 32, 192
	}
	edited, err := json.MarshalIndent(hf, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(out), ".standin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	cfgOut := filepath.Join(tmp, model.ConfigFile)
	if err := os.WriteFile(cfgOut, edited, 0o644); err != nil {
		return err
	}
	cfg, err := model.ReadConfig(cfgOut)
	if err != nil {
		return fmt.Errorf("%s: %w", cfgPath, err)
	}
	b, err := backend.New(backend.Choose(""))
	if err != nil {
		return err
	}
	m, err := model.New(b, cfg, seed)
	if err != nil {
		return err
	}
	if err := m.SaveWith(tmp, model.SaveOptions{}); err != nil {
		return err
	}
	gen := map[string]any{}
	for _, k := range []string{"bos_token_id", "eos_token_id"} {
		if v, ok := hf[k]; ok {
			gen[k] = v
		}
	}
	genData, err := json.MarshalIndent(gen, "", "  ")
	if err != nil {
		return err
	}
	// The given config.json, not hacrl's rendering of it, and the tokenizer.
	files := map[string][]byte{model.ConfigFile: edited, model.GenerationConfigFile: genData}
	for _, f := range []string{"tokenizer.json", tokenizer.ConfigFile} {
		data, err := os.ReadFile(filepath.Join(tokDir, f))
		if err != nil {
			return err
		}
		files[f] = data
	}
	for f, data := range files {
		if err := os.WriteFile(filepath.Join(tmp, f), data, 0o644); err != nil {
			return err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp's 0700
		return err
	}
	if err := os.Rename(tmp, out); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "standin: %s: %s, %d layers, %d parameters\n", out, cfg.ModelType, cfg.Layers, m.NumParams())
	return nil
}
