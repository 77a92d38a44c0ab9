package model

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gomlx/compute/dtypes"
)

// The config.json files of Qwen/Qwen3-0.6B and meta-llama/Llama-3.2-1B-Instruct
// as published.
const (
	qwen3Config = `{
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
  "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
  "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": true,
  "use_sliding_window": false, "vocab_size": 151936}`
	llama32Config = `{
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "head_dim": 64,
  "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8, "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
    "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256}`
)

// The published Qwen3 and Llama 3.2 configs read as what they are, with
// the parameter counts of the published models.
func TestReadRealConfigs(t *testing.T) {
	tests := []struct {
		name, json string
		want       Config
		params     int64
	}{
		{"Qwen3-0.6B", qwen3Config, Config{Family: "llama", ModelType: "qwen3", Vocab: 151936, Dim: 1024, Layers: 28,
			Heads: 16, KVHeads: 8, Hidden: 3072, MaxSeq: 40960, Activation: "silu", NormEps: 1e-6, RopeTheta: 1e6,
			TieEmbeddings: true, BOS: 151643, EOS: 151645, HeadSize: 128, QKNorm: true, DType: "bfloat16"}, 596049920},
		{"Llama-3.2-1B", llama32Config, Config{Family: "llama", ModelType: "llama", Vocab: 128256, Dim: 2048, Layers: 16,
			Heads: 32, KVHeads: 8, Hidden: 8192, MaxSeq: 131072, Activation: "silu", NormEps: 1e-5, RopeTheta: 5e5,
			TieEmbeddings: true, BOS: 128000, EOS: 128001, DType: "bfloat16",
			RopeScaling: &RopeScaling{Type: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192}}, 1235814400},
	}
	for _, tt := range tests {
		path := filepath.Join(t.TempDir(), ConfigFile)
		if err := os.WriteFile(path, []byte(tt.json), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := ReadConfig(path)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: got %+v\nwant %+v", tt.name, got, tt.want)
		}
		if n := blankModel(testBackend(t), got, dtypes.Float32).NumParams(); n != tt.params {
			t.Errorf("%s: NumParams = %d, want %d", tt.name, n, tt.params)
		}
		// Written back and read again, the same config.
		if err := got.WriteJSON(path); err != nil {
			t.Fatal(err)
		}
		again, err := ReadConfig(path)
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Errorf("%s: round trip gave %+v, %v", tt.name, again, err)
		}
	}
}

// llama3 scaling with the published Llama 3.2 values keeps the high
// frequencies, divides the low ones by the factor, and interpolates between.
func TestLlama3Frequencies(t *testing.T) {
	c := Config{Family: "llama", Dim: 2048, Heads: 32, RopeTheta: 5e5,
		RopeScaling: &RopeScaling{Type: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192}}
	plain := c
	plain.RopeScaling = nil
	got, base := c.ropeFrequencies(), plain.ropeFrequencies()
	var kept, divided, between int
	for i := range got {
		switch wave := 2 * 3.141592653589793 / base[i]; {
		case wave < 2048:
			kept++
			if got[i] != base[i] {
				t.Errorf("frequency %d (wavelength %.0f): %v, want it kept (%v)", i, wave, got[i], base[i])
			}
		case wave > 8192:
			divided++
			if got[i] != base[i]/32 {
				t.Errorf("frequency %d (wavelength %.0f): %v, want %v/32", i, wave, got[i], base[i])
			}
		default:
			between++
			if !(got[i] < base[i] && got[i] > base[i]/32) {
				t.Errorf("frequency %d (wavelength %.0f): %v, want between %v/32 and %v", i, wave, got[i], base[i], base[i])
			}
		}
	}
	if kept == 0 || divided == 0 || between == 0 {
		t.Errorf("kept %d, divided %d, interpolated %d: the test should reach all three", kept, divided, between)
	}
}

// A config.json that asks for something hacrl does not compute is refused
// at load, naming the file and the field.
func TestReadConfigRefusesUnsupported(t *testing.T) {
	tests := []struct {
		name, base, from, to, field string
	}{
		{"rope type yarn", llama32Config, `"rope_type": "llama3"`, `"rope_type": "yarn"`, "rope_scaling.rope_type"},
		{"old spelling, linear", llama32Config, `"rope_type": "llama3"`, `"type": "linear"`, "rope_scaling.rope_type"},
		{"llama3 without its context", llama32Config, `"original_max_position_embeddings": 8192,`, ``, "original_max_position_embeddings"},
		{"llama3 with equal factors", llama32Config, `"high_freq_factor": 4.0`, `"high_freq_factor": 1.0`, "HighFreqFactor"},
		{"rope_parameters dynamic", qwen3Config, `"rope_scaling": null,`, `"rope_parameters": {"rope_type": "dynamic", "rope_theta": 1e6},`, "rope_parameters.rope_type"},
		{"sliding window", qwen3Config, `"sliding_window": null`, `"sliding_window": 4096`, ""},
		{"hidden_act", llama32Config, `"hidden_act": "silu"`, `"hidden_act": "gelu"`, "hidden_act"},
		{"mlp_bias", llama32Config, `"mlp_bias": false`, `"mlp_bias": true`, "mlp_bias"},
		{"attention_dropout", qwen3Config, `"attention_dropout": 0.0`, `"attention_dropout": 0.1`, "attention_dropout"},
		{"odd head_dim", qwen3Config, `"head_dim": 128`, `"head_dim": 127`, "head_dim"},
		{"partial rotary", llama32Config, `"pretraining_tp": 1`, `"partial_rotary_factor": 0.5`, "partial_rotary_factor"},
		{"model_type", qwen3Config, `"model_type": "qwen3"`, `"model_type": "mistral"`, "model_type"},
	}
	for _, tt := range tests {
		text := tt.base
		if tt.name == "sliding window" {
			text = strings.Replace(text, `"use_sliding_window": false`, `"use_sliding_window": true`, 1)
			text = strings.Replace(text, `"max_window_layers": 28`, `"max_window_layers": 20`, 1)
			tt.field = "use_sliding_window"
		}
		if !strings.Contains(text, tt.from) {
			t.Fatalf("%s: the base config has no %s", tt.name, tt.from)
		}
		text = strings.Replace(text, tt.from, tt.to, 1)
		path := filepath.Join(t.TempDir(), ConfigFile)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ReadConfig(path)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("%s: error %v, want one naming %s and %s", tt.name, err, path, tt.field)
		}
	}
	// Harmless spellings are accepted: no scaling as null, absent or
	// "default", a sliding window switched off or reaching no layer, and
	// transformers 5's rope_parameters carrying rope_theta.
	for name, edit := range map[string][2]string{
		"rope_scaling absent":    {`"rope_scaling": null,`, ``},
		"rope_scaling default":   {`"rope_scaling": null`, `"rope_scaling": {"rope_type": "default"}`},
		"window past all layers": {`"use_sliding_window": false`, `"use_sliding_window": true`},
		"rope_parameters":        {`"rope_scaling": null, "rope_theta": 1000000,`, `"rope_parameters": {"rope_type": "default", "rope_theta": 1000000},`},
	} {
		path := filepath.Join(t.TempDir(), ConfigFile)
		if !strings.Contains(qwen3Config, edit[0]) {
			t.Fatalf("%s: the base config has no %s", name, edit[0])
		}
		if err := os.WriteFile(path, []byte(strings.Replace(qwen3Config, edit[0], edit[1], 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := ReadConfig(path)
		if err != nil || c.RopeTheta != 1e6 || c.RopeScaling != nil {
			t.Errorf("%s: %+v, %v", name, c, err)
		}
	}
}

// A checkpoint whose attention tensors disagree with config.json's
// head_dim is refused, naming the weights file, the tensor and the config
// fields its shape comes from.
func TestHeadDimDisagreesWithTensors(t *testing.T) {
	m := newTiny(t, "qwen3-gqa", 5)
	dir := t.TempDir()
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, ConfigFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"head_dim": 6`) {
		t.Fatalf("config.json has no head_dim 6:\n%s", data)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), `"head_dim": 6`, `"head_dim": 8`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(testBackend(t), dir)
	for _, want := range []string{WeightsFile, "q_proj.weight", "[24 16]", "[32 16]", "head_dim 8"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want one containing %q", err, want)
		}
	}
	// Put back, it loads and scores as before.
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(testBackend(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	seq := []Sequence{{Prompt: []int{1, 2}, Response: []int{3, 4, 5}}}
	a, err := m.Score(context.Background(), seq, false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := loaded.Score(context.Background(), seq, false)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.LogProbs, b.LogProbs) {
		t.Errorf("log-probs after save and load %v, before %v", b.LogProbs, a.LogProbs)
	}
}

// A model built in code with model_type qwen2 has Qwen2's q/k/v biases
// (config.json has no field saying so), so what it saves loads back.
func TestQwen2InCodeRoundTrips(t *testing.T) {
	cfg := Config{Family: "llama", ModelType: "qwen2", Vocab: 40, Dim: 16, Layers: 1, Heads: 2, KVHeads: 1, Hidden: 32, MaxSeq: 32, BOS: -1, EOS: -1}
	m, err := New(testBackend(t), cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Config().AttentionBias {
		t.Fatal("qwen2 model without q/k/v biases")
	}
	dir := t.TempDir()
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	back, err := Load(testBackend(t), dir)
	if err != nil {
		t.Fatalf("loading a saved qwen2 model: %v", err)
	}
	if back.NumParams() != m.NumParams() {
		t.Errorf("loaded %d parameters, saved %d", back.NumParams(), m.NumParams())
	}
}
