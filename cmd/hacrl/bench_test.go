package main

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/internal/kernel"
	"github.com/hacrl/hacrl/internal/pyenv"
	"github.com/hacrl/hacrl/model"
)

// llamaParams is the closed-form parameter count of a llama-family config:
// embedding, per block two norms, q/k/v/o, the SwiGLU MLP, Qwen2's q/k/v
// biases and Qwen3's q/k norms, the final norm and an untied head.
func llamaParams(c model.Config) int64 {
	d, dh, hid := int64(c.Dim), int64(c.HeadDim()), int64(c.Hidden)
	q, kv := int64(c.Heads)*dh, int64(c.KVHeads)*dh
	block := 2*d + 2*d*q + 2*d*kv + 3*d*hid
	if c.AttentionBias {
		block += q + 2*kv
		if c.ModelType != "qwen2" {
			block += d
		}
	}
	if c.QKNorm {
		block += 2 * dh
	}
	n := int64(c.Vocab)*d + int64(c.Layers)*block + d
	if !c.TieEmbeddings {
		n += int64(c.Vocab) * d
	}
	return n
}

// The bench/configs files carry the published architectures as the model
// package reads them, and their parameter counts are the published ones.
func TestBenchConfigs(t *testing.T) {
	llama3 := &model.RopeScaling{Type: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192}
	tests := []struct {
		file   string
		want   model.Config
		params int64
	}{
		{"qwen2.5-0.5b.json", model.Config{Family: "llama", ModelType: "qwen2", Vocab: 151936, Dim: 896, Layers: 24, Heads: 14,
			KVHeads: 2, Hidden: 4864, MaxSeq: 32768, Activation: "silu", NormEps: 1e-6, RopeTheta: 1e6, TieEmbeddings: true,
			AttentionBias: true, BOS: 151643, EOS: 151643, DType: "bfloat16"}, 494032768},
		{"qwen3-0.6b.json", model.Config{Family: "llama", ModelType: "qwen3", Vocab: 151936, Dim: 1024, Layers: 28, Heads: 16,
			KVHeads: 8, Hidden: 3072, MaxSeq: 40960, Activation: "silu", NormEps: 1e-6, RopeTheta: 1e6, TieEmbeddings: true,
			BOS: 151643, EOS: 151645, HeadSize: 128, QKNorm: true, DType: "bfloat16"}, 596049920},
		{"qwen3-1.7b.json", model.Config{Family: "llama", ModelType: "qwen3", Vocab: 151936, Dim: 2048, Layers: 28, Heads: 16,
			KVHeads: 8, Hidden: 6144, MaxSeq: 40960, Activation: "silu", NormEps: 1e-6, RopeTheta: 1e6, TieEmbeddings: true,
			BOS: 151643, EOS: 151645, HeadSize: 128, QKNorm: true, DType: "bfloat16"}, 1720574976},
		{"llama3.2-1b.json", model.Config{Family: "llama", ModelType: "llama", Vocab: 128256, Dim: 2048, Layers: 16, Heads: 32,
			KVHeads: 8, Hidden: 8192, MaxSeq: 131072, Activation: "silu", NormEps: 1e-5, RopeTheta: 500000, TieEmbeddings: true,
			BOS: 128000, EOS: 128001, RopeScaling: llama3, DType: "bfloat16"}, 1235814400},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := model.ReadConfig(repoPath(t, filepath.Join("bench/configs", tt.file)))
			if err != nil {
				t.Fatal(err)
			}
			if want := tt.want.Normalized(); !reflect.DeepEqual(got, want) {
				t.Errorf("config\n got %+v\nwant %+v", got, want)
			}
			if n := llamaParams(got); n != tt.params {
				t.Errorf("%d parameters, want the published %d", n, tt.params)
			}
		})
	}
}

// bench engine --config builds the file's model, --layers replacing only its
// depth, and reports the weight bytes, the decoding rate and the memory
// bandwidth.
func TestBenchEngineConfig(t *testing.T) {
	bin := hacrlBin(t)
	path := filepath.Join(t.TempDir(), "config.json")
	// Qwen2 (q/k/v biases), tied: small, but every field the real configs
	// use. With 8 tokens, stopping at the end token (3) would end most
	// sampled sequences early; the bench, as bench/torch, never stops.
	cfg := `{"model_type": "qwen2", "vocab_size": 8, "hidden_size": 32, "num_hidden_layers": 5,
	"num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 48, "max_position_embeddings": 64,
	"rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": true, "eos_token_id": 3}`
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	mc, err := model.ReadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	mc.Layers = 2
	args := []string{"bench", "engine", "--config", path, "--layers", "2", "--seq", "8", "--batch", "2", "--steps", "1",
		"--warmup", "0", "--sample-runs", "2", "--sample-batch", "3", "--sample-prompt", "5", "--sample-tokens", "6",
		"--threads", "1", "--mem-read-mb", "8", "--cpuprofile", filepath.Join(t.TempDir(), "cpu.prof")}
	r := run(t, bin, "", "", nil, args...)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if st, err := os.Stat(args[len(args)-1]); err != nil || st.Size() == 0 {
		t.Errorf("--cpuprofile wrote no profile: %v", err)
	}
	vals := jsonValues(t, r.stdout)
	if len(vals) != 1 {
		t.Fatalf("%d JSON values, want 1:\n%s", len(vals), r.stdout)
	}
	res := vals[0]
	params := llamaParams(mc)
	for key, want := range map[string]float64{"layers": 2, "dim": 32, "vocab": 8, "kv_heads": 2, "hidden": 48,
		"params": float64(params), "sample_prompt": 5, "sample_tokens": 6, "sample_batch": 3,
		"weights_mb": math.Round(float64(4*params)/(1<<20)*10) / 10} {
		if got, ok := res[key].(float64); !ok || got != want {
			t.Errorf("%s = %v, want %v", key, res[key], want)
		}
	}
	// 2 runs × 3 sequences × 6 tokens, whatever the model draws.
	if rate, ms := res["sample_tokens_per_s"].(float64), res["sample_ms"].(float64); math.Abs(rate*ms*2/1000-36) > 0.5 {
		t.Errorf("sample_tokens_per_s %v over 2 runs of %v ms: %v tokens, want 36", rate, ms, rate*ms*2/1000)
	}
	// Every forward pass (6 per run) reads the 4·params weight bytes (all of
	// them: the head is tied to the embedding).
	if gbs, ms := res["decode_weight_gb_per_s"].(float64), res["sample_ms"].(float64); math.Abs(gbs-float64(4*params)*6/(ms/1000)/1e9) > 0.01+0.01*gbs {
		t.Errorf("decode_weight_gb_per_s %v, want %v", gbs, float64(4*params)*6/(ms/1000)/1e9)
	}
	if res["compute_dtype"] != "float32" {
		t.Errorf("compute_dtype = %v, want float32", res["compute_dtype"])
	}
	if bw, ok := res["mem_read_gb_per_s"].(float64); !ok || bw <= 0 {
		t.Errorf("mem_read_gb_per_s = %v, want > 0", res["mem_read_gb_per_s"])
	}
	// 6 operations per weight and token (all weights take part in the
	// products: the head is tied), against the CPU's measured peak.
	tok, gf := res["train_tokens_per_s"].(float64), res["train_weight_gflops"].(float64)
	if want := 6 * float64(params) * tok / 1e9; math.Abs(gf-want) > 0.01+0.01*want {
		t.Errorf("train_weight_gflops %v at %v tokens/s, want %v", gf, tok, want)
	}
	if res["kernel_path"] != kernel.Path() {
		t.Errorf("kernel_path = %v, want %s", res["kernel_path"], kernel.Path())
	}
	if peak, ok := res["fma_peak_gflops"].(float64); kernel.Path() != "portable" && (!ok || peak <= 0 || math.Abs(res["train_peak_fraction"].(float64)-gf/peak) > 0.002) {
		t.Errorf("fma_peak_gflops %v, train_peak_fraction %v: want the measured peak and train_weight_gflops' fraction of it", res["fma_peak_gflops"], res["train_peak_fraction"])
	}

	for _, bad := range [][]string{{"--layers", "0"}, {"--sample-prompt", "0"}, {"--sample-prompt", "60", "--sample-tokens", "5"},
		{"--mem-read-mb", "-1"}, {"--compute-dtype", "fp16"}, {"--compute-dtype", "bfloat16"}} {
		r := run(t, bin, "", "", nil, append([]string{"bench", "engine", "--config", path, "--steps", "0"}, bad...)...)
		if r.code != 2 {
			t.Errorf("bench engine %v: exit %d, want 2 (usage)\n%s", bad, r.code, r.stderr)
		}
	}

	// --steps 0 measures sampling only (bench/llamacpp samples model.New's
	// weights, untouched by a step): no training fields, whose rates would
	// be over zero seconds.
	r = run(t, bin, "", "", nil, "bench", "engine", "--config", path, "--layers", "2", "--steps", "0", "--warmup", "0",
		"--sample-runs", "1", "--sample-batch", "2", "--sample-tokens", "3", "--threads", "1", "--mem-read-mb", "0")
	if r.code != 0 {
		t.Fatalf("--steps 0: exit %d\n%s", r.code, r.stderr)
	}
	if vals = jsonValues(t, r.stdout); len(vals) != 1 {
		t.Fatalf("--steps 0: %d JSON values, want 1:\n%s", len(vals), r.stdout)
	}
	for _, k := range []string{"train_step_ms", "train_tokens_per_s", "final_loss", "train_weight_gflops", "train_peak_fraction"} {
		if v, ok := vals[0][k]; ok {
			t.Errorf("--steps 0: %s = %v, want no such field", k, v)
		}
	}
	if rate, ok := vals[0]["sample_tokens_per_s"].(float64); !ok || rate <= 0 {
		t.Errorf("--steps 0: sample_tokens_per_s = %v, want > 0", vals[0]["sample_tokens_per_s"])
	}
}

// bench engine --lora-rank trains adapters on the targeted modules only and
// reports them: trainable_params is r·(in+out) summed over the adapted
// modules, params stays the base model's.
func TestBenchEngineLoRA(t *testing.T) {
	bin := hacrlBin(t)
	path := writeTinyQwen3Config(t)
	const d, q, kv, hid, layers = 32, 64, 32, 48, 2
	shapes := map[string][2]int{"q_proj": {d, q}, "k_proj": {d, kv}, "v_proj": {d, kv}, "o_proj": {q, d},
		"gate_proj": {d, hid}, "up_proj": {d, hid}, "down_proj": {hid, d}}
	adapters := func(r int, modules ...string) float64 {
		n := 0
		for _, m := range modules {
			n += layers * r * (shapes[m][0] + shapes[m][1])
		}
		return float64(n)
	}
	all := []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
	mc, err := model.ReadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	mc.Layers = layers
	params := float64(llamaParams(mc))
	tests := []struct {
		flags     []string
		rank      float64
		alpha     float64 // 0: no lora_alpha field
		targets   []any
		trainable float64
	}{
		{nil, 0, 0, nil, params},
		{[]string{"--lora-rank", "4"}, 4, 8, []any{"all-linear"}, adapters(4, all...)},
		{[]string{"--lora-rank", "2", "--lora-alpha", "5", "--lora-targets", "q_proj, v_proj,down_proj"}, 2, 5,
			[]any{"q_proj", "v_proj", "down_proj"}, adapters(2, "q_proj", "v_proj", "down_proj")},
		{[]string{"--lora-rank", "3", "--lora-targets", "self_attn.o_proj,up_proj"}, 3, 6,
			[]any{"self_attn.o_proj", "up_proj"}, adapters(3, "o_proj", "up_proj")},
	}
	base := []string{"bench", "engine", "--config", path, "--layers", "2", "--seq", "8", "--batch", "2", "--steps", "1",
		"--warmup", "1", "--sample-runs", "1", "--sample-batch", "2", "--sample-tokens", "4", "--threads", "1", "--mem-read-mb", "0"}
	for _, tt := range tests {
		r := run(t, bin, "", "", nil, append(base, tt.flags...)...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d\n%s", tt.flags, r.code, r.stderr)
		}
		vals := jsonValues(t, r.stdout)
		if len(vals) != 1 {
			t.Fatalf("%v: %d JSON values, want 1:\n%s", tt.flags, len(vals), r.stdout)
		}
		res := vals[0]
		want := map[string]any{"params": params, "trainable_params": tt.trainable, "lora_rank": tt.rank,
			"engine": "hacrl-native"}
		if tt.alpha != 0 {
			want["lora_alpha"], want["lora_targets"] = tt.alpha, tt.targets
		}
		for key, w := range want {
			if !reflect.DeepEqual(res[key], w) {
				t.Errorf("%v: %s = %v, want %v", tt.flags, key, res[key], w)
			}
		}
		if tt.alpha == 0 && (res["lora_alpha"] != nil || res["lora_targets"] != nil) {
			t.Errorf("%v: full fine-tuning reports lora_alpha %v, lora_targets %v", tt.flags, res["lora_alpha"], res["lora_targets"])
		}
		if l, ok := res["final_loss"].(float64); !ok || math.IsNaN(l) || math.Abs(l-math.Log(16)) > 0.5 {
			t.Errorf("%v: final_loss %v, want about ln 16 after two updates", tt.flags, res["final_loss"])
		}
	}

	for _, bad := range [][]string{{"--lora-rank", "-1"}, {"--lora-alpha", "4"}, {"--lora-rank", "4", "--lora-alpha", "0"},
		{"--lora-rank", "4", "--lora-targets", ","}, {"--lora-rank", "4", "--lora-targets", "c_attn"}} {
		r := run(t, bin, "", "", nil, append(base, bad...)...)
		if r.code != 2 || !strings.Contains(r.stderr, "--lora-") {
			t.Errorf("bench engine %v: exit %d, want 2 (usage) naming the flag\n%s", bad, r.code, r.stderr)
		}
	}
}

// The PyTorch reference (bench/torch) trains the same LoRA adapters as
// bench engine: on the same flags both report the same base and trainable
// parameter counts and adapters, and its self-check (step 0 equals the base
// bit for bit, the closed-form count, a frozen base) passes.
func TestBenchLoRAMatchesTorch(t *testing.T) {
	python := pyenv.Python(t)
	bin := hacrlBin(t)
	script := repoPath(t, "bench/torch/bench.py")
	if out, err := exec.Command(python, script, "--check").CombinedOutput(); err != nil {
		t.Fatalf("bench.py --check: %v\n%s", err, out)
	}
	path := filepath.Join(t.TempDir(), "config.json")
	cfg := `{"model_type": "qwen3", "vocab_size": 16, "hidden_size": 32, "num_hidden_layers": 3,
	"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 48,
	"max_position_embeddings": 64, "rms_norm_eps": 1e-6, "rope_theta": 1000000, "tie_word_embeddings": true}`
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	common := []string{"--seq", "8", "--batch", "2", "--steps", "1", "--warmup", "0", "--sample-runs", "1",
		"--sample-batch", "2", "--sample-tokens", "3", "--threads", "1", "--mem-read-mb", "0"}
	for _, tt := range []struct {
		flags []string
		fails bool // a target no module of the family has: an error on both sides
	}{
		{[]string{"--config", path, "--layers", "2", "--lora-rank", "4"}, false},
		{[]string{"--config", path, "--lora-rank", "2", "--lora-alpha", "3", "--lora-targets", "k_proj,self_attn.o_proj,gate_proj"}, false},
		{[]string{"--config", path, "--layers", "1"}, false},
		{[]string{"--family", "gpt", "--dim", "32", "--layers", "2", "--lora-rank", "3", "--lora-targets", "c_attn,mlp.c_proj"}, false},
		{[]string{"--family", "llama", "--dim", "32", "--kv-heads", "2", "--layers", "2", "--lora-rank", "5", "--lora-targets", "c_proj"}, true},
	} {
		flags := tt.flags
		args := append(slices.Clone(common), flags...)
		r := run(t, bin, "", "", nil, append([]string{"bench", "engine"}, args...)...)
		out, err := exec.Command(python, append([]string{script}, args...)...).Output()
		if tt.fails {
			if r.code != 2 || err == nil {
				t.Errorf("%v: hacrl exit %d (want 2), torch %v (want an error)", flags, r.code, err)
			}
			continue
		}
		if r.code != 0 || err != nil {
			t.Fatalf("%v: hacrl exit %d, torch %v\n%s", flags, r.code, err, r.stderr)
		}
		g, tv := jsonValues(t, r.stdout), jsonValues(t, string(out))
		if len(g) != 1 || len(tv) != 1 {
			t.Fatalf("%v: %d and %d JSON values, want 1 each", flags, len(g), len(tv))
		}
		for _, key := range []string{"params", "trainable_params", "lora_rank", "lora_alpha", "lora_targets"} {
			if !reflect.DeepEqual(g[0][key], tv[0][key]) {
				t.Errorf("%v: %s: hacrl %v, torch %v", flags, key, g[0][key], tv[0][key])
			}
		}
		if g[0]["trainable_params"] == nil {
			t.Errorf("%v: no trainable_params", flags)
		}
	}
}

func TestMemReadBandwidth(t *testing.T) {
	if bw := memReadGBPerS(4<<20, 2); !(bw > 0) || math.IsInf(bw, 0) {
		t.Errorf("memReadGBPerS = %v, want a positive finite rate", bw)
	}
	x := []uint64{1, 2, 3, 4, 5, 6, 7}
	if s := sumWords(x); s != 28 {
		t.Errorf("sumWords(%v) = %d, want 28", x, s)
	}
}

// writeTinyQwen3Config writes a 3-layer Qwen3 config.json — a head_dim
// (16) that is not hidden/heads, GQA, q/k norms, a tied head — and returns
// its path.
func writeTinyQwen3Config(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.json")
	cfg := `{"model_type": "qwen3", "vocab_size": 16, "hidden_size": 32, "num_hidden_layers": 3,
	"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 48,
	"max_position_embeddings": 64, "rms_norm_eps": 1e-6, "rope_theta": 1000000, "tie_word_embeddings": true}`
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
