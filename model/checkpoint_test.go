package model

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/safetensors"
)

// rounded returns a copy of m whose weights are rounded to dtype ("BF16" or
// "F16") and widened back: what a checkpoint of that dtype holds.
func rounded(t *testing.T, m *Model, dtype string) *Model {
	t.Helper()
	c, err := m.Clone()
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range c.specs {
		x, err := safetensors.FromFloat32As(dtype, s.shape, c.param32(i))
		if err != nil {
			t.Fatal(err)
		}
		v, err := x.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		c.setParam32(i, v)
	}
	return c
}

// sameBits reports the first parameter whose float32 bits differ.
func sameBits(t *testing.T, what string, a, b *Model) {
	t.Helper()
	for i, s := range a.specs {
		x, y := a.param32(i), b.param32(i)
		for j := range x {
			if x[j] != y[j] || (x[j] == 0 && (1/x[j] > 0) != (1/y[j] > 0)) {
				t.Fatalf("%s: %s[%d] = %v, want %v", what, s.name, j, y[j], x[j])
			}
		}
	}
}

// rawTensors reads every tensor of a checkpoint directory's weights, single
// or sharded, and the metadata of each file.
func rawTensors(t *testing.T, dir string) (map[string]safetensors.Tensor, []map[string]string) {
	t.Helper()
	w, err := openWeights(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	out := map[string]safetensors.Tensor{}
	var metas []map[string]string
	for _, f := range w.Files() {
		metas = append(metas, f.Metadata())
	}
	for _, name := range w.Names() {
		f, _ := w.Lookup(name)
		x, err := f.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = x
	}
	return out, metas
}

func weightFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "model") {
			names = append(names, e.Name())
		}
	}
	return names
}

// TestSaveLoadDTypes saves every tiny family in each dtype, sharded and not,
// and checks the published layout, that loading gives the saved weights
// rounded to the dtype (bit for bit, hence the same log-probs), and that
// saving the loaded model again in its own dtype reproduces the tensors'
// bytes exactly (bf16 → f32 → bf16 is the identity).
func TestSaveLoadDTypes(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		dtype, st string
		shard     int64
	}{
		{"float32", "F32", 0},
		{"float32", "F32", 1500},
		{"bfloat16", "BF16", 0},
		{"bfloat16", "BF16", 700},
		{"float16", "F16", 900},
	}
	rng := rand.New(rand.NewPCG(4, 4))
	for _, tc := range tests {
		for name := range tinyConfigs {
			what := name + "/" + tc.dtype
			m := newTiny(t, name, 9)
			dir := t.TempDir()
			if err := m.SaveWith(dir, SaveOptions{DType: tc.dtype, MaxShardSize: tc.shard}); err != nil {
				t.Fatal(err)
			}
			files := weightFiles(t, dir)
			if tc.shard == 0 && !slices.Equal(files, []string{WeightsFile, WeightsIndexFile}) {
				t.Fatalf("%s: files %v, want %s and its index", what, files, WeightsFile)
			}
			if tc.shard > 0 && (len(files) < 3 || !slices.Contains(files, WeightsIndexFile) || slices.Contains(files, WeightsFile)) {
				t.Fatalf("%s: files %v, want shards and %s", what, files, WeightsIndexFile)
			}
			raw, metas := rawTensors(t, dir)
			for _, meta := range metas {
				if meta["format"] != "pt" {
					t.Errorf("%s: shard metadata %v, want format pt", what, meta)
				}
			}
			if len(raw) != len(m.specs) {
				t.Errorf("%s: %d tensors saved, want %d", what, len(raw), len(m.specs))
			}
			for _, s := range m.specs {
				if x, ok := raw[s.name]; !ok || x.DType != tc.st || !slices.Equal(x.Shape, s.fileShape()) {
					t.Errorf("%s: tensor %s saved as %s %v (present %v), want %s %v", what, s.name, x.DType, x.Shape, ok, tc.st, s.fileShape())
				}
			}
			var hf map[string]any
			data, _ := os.ReadFile(filepath.Join(dir, ConfigFile))
			if err := json.Unmarshal(data, &hf); err != nil || hf["torch_dtype"] != tc.dtype {
				t.Errorf("%s: config.json torch_dtype = %v (%v), want %s", what, hf["torch_dtype"], err, tc.dtype)
			}

			loaded, err := Load(testBackend(t), dir)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if loaded.Config().DType != tc.dtype {
				t.Errorf("%s: loaded DType %q", what, loaded.Config().DType)
			}
			want := m
			if tc.st != "F32" {
				want = rounded(t, m, tc.st)
			}
			sameBits(t, what, want, loaded)
			probe := []Sequence{{Prompt: randomTokens(rng, 4, 16), Response: randomTokens(rng, 7, 16)}}
			for _, engine := range []Engine{EngineNative, EngineGraph} {
				want.SetEngine(engine)
				loaded.SetEngine(engine)
				a, err := want.Score(ctx, probe, false)
				if err != nil {
					t.Fatal(err)
				}
				b, err := loaded.Score(ctx, probe, false)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(a.LogProbs[0], b.LogProbs[0]) {
					t.Errorf("%s, %s engine: log-probs %v, want those of the rounded original %v", what, engine, b.LogProbs[0], a.LogProbs[0])
				}
			}

			again := t.TempDir()
			if err := loaded.Save(again); err != nil { // the source dtype, one file
				t.Fatal(err)
			}
			raw2, _ := rawTensors(t, again)
			for n, x := range raw {
				if y := raw2[n]; y.DType != x.DType || string(y.Data) != string(x.Data) {
					t.Fatalf("%s: %s saved again as %s differs from the loaded %s bytes", what, n, y.DType, x.DType)
				}
			}
		}
	}
}

// TestSaveReplacesLayout saves sharded, then single, into one directory:
// only the files of the last layout stay, and it loads.
func TestSaveReplacesLayout(t *testing.T) {
	m := newTiny(t, "llama-gqa", 3)
	dir := t.TempDir()
	if err := m.SaveWith(dir, SaveOptions{MaxShardSize: 1000}); err != nil {
		t.Fatal(err)
	}
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	if files := weightFiles(t, dir); !slices.Equal(files, []string{WeightsFile, WeightsIndexFile}) {
		t.Fatalf("files %v after a single-file save, want %s and its index", files, WeightsFile)
	}
	if err := m.SaveWith(dir, SaveOptions{MaxShardSize: 1000}); err != nil {
		t.Fatal(err)
	}
	if files := weightFiles(t, dir); slices.Contains(files, WeightsFile) {
		t.Fatalf("files %v after a sharded save still hold %s", files, WeightsFile)
	}
	loaded, err := Load(testBackend(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	sameBits(t, "resharded", m, loaded)
	if err := m.SaveWith(dir, SaveOptions{DType: "float64"}); err == nil || !strings.Contains(err.Error(), "float64") {
		t.Errorf("SaveWith(float64) error = %v, want one naming the dtype", err)
	}
}

// TestShardedLoadErrors breaks a sharded checkpoint in each way the format
// allows and checks that Load names the file and the tensor.
func TestShardedLoadErrors(t *testing.T) {
	const victim = "model.layers.1.self_attn.k_proj.weight"
	// shardOf returns the shard holding victim, and its tensors.
	shardOf := func(t *testing.T, dir string) (string, map[string]safetensors.Tensor) {
		idx, err := safetensors.ReadIndex(filepath.Join(dir, WeightsIndexFile))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, idx.WeightMap[victim])
		ts, _, err := safetensors.Read(path)
		if err != nil {
			t.Fatal(err)
		}
		return path, ts
	}
	rewrite := func(t *testing.T, dir string, change func(ts map[string]safetensors.Tensor)) string {
		path, ts := shardOf(t, dir)
		change(ts)
		if err := safetensors.Write(path, ts, nil); err != nil {
			t.Fatal(err)
		}
		return filepath.Base(path)
	}
	tests := []struct {
		name   string
		break_ func(t *testing.T, dir string) []string // returns the substrings the error must hold
	}{
		{"missing shard", func(t *testing.T, dir string) []string {
			path, _ := shardOf(t, dir)
			os.Remove(path)
			return []string{WeightsIndexFile, filepath.Base(path), "missing", victim}
		}},
		{"index names a tensor absent from its shard", func(t *testing.T, dir string) []string {
			shard := rewrite(t, dir, func(ts map[string]safetensors.Tensor) { delete(ts, victim) })
			return []string{shard, victim, "not in it"}
		}},
		{"tensor in neither index nor shards", func(t *testing.T, dir string) []string {
			rewrite(t, dir, func(ts map[string]safetensors.Tensor) { delete(ts, victim) })
			index := filepath.Join(dir, WeightsIndexFile)
			idx, err := safetensors.ReadIndex(index)
			if err != nil {
				t.Fatal(err)
			}
			delete(idx.WeightMap, victim)
			data, _ := json.Marshal(idx)
			if err := os.WriteFile(index, data, 0o644); err != nil {
				t.Fatal(err)
			}
			return []string{WeightsIndexFile, victim, "missing"}
		}},
		{"shard tensor not in the index", func(t *testing.T, dir string) []string {
			shard := rewrite(t, dir, func(ts map[string]safetensors.Tensor) { ts["extra.weight"] = ts[victim] })
			return []string{shard, "extra.weight", "not mapped"}
		}},
		{"wrong shape", func(t *testing.T, dir string) []string {
			shard := rewrite(t, dir, func(ts map[string]safetensors.Tensor) {
				x := ts[victim]
				x.Shape = []int{x.Shape[1], x.Shape[0]}
				ts[victim] = x
			})
			return []string{shard, victim, "shape"}
		}},
		{"integer dtype", func(t *testing.T, dir string) []string {
			shard := rewrite(t, dir, func(ts map[string]safetensors.Tensor) {
				x := ts[victim]
				x.DType, x.Data = "I8", x.Data[:len(x.Data)/4]
				ts[victim] = x
			})
			return []string{shard, victim, "dtype I8"}
		}},
		{"NaN weight", func(t *testing.T, dir string) []string {
			shard := rewrite(t, dir, func(ts map[string]safetensors.Tensor) {
				ts[victim] = withElement(t, ts[victim], 2, float32(math.NaN()))
			})
			return []string{shard, victim, "element 2 is NaN"}
		}},
		{"index and single file both missing", func(t *testing.T, dir string) []string {
			os.Remove(filepath.Join(dir, WeightsIndexFile))
			return []string{dir, WeightsFile, WeightsIndexFile}
		}},
		{"malformed index", func(t *testing.T, dir string) []string {
			os.WriteFile(filepath.Join(dir, WeightsIndexFile), []byte(`{"weight_map": []}`), 0o644)
			return []string{WeightsIndexFile, "weight_map"}
		}},
	}
	m := newTiny(t, "llama-gqa", 5)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := m.SaveWith(dir, SaveOptions{MaxShardSize: 1000}); err != nil {
				t.Fatal(err)
			}
			want := tc.break_(t, dir)
			_, err := Load(testBackend(t), dir)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	// F64 tensors load (rounded to float32), as transformers would cast them.
	dir := t.TempDir()
	if err := m.SaveWith(dir, SaveOptions{MaxShardSize: 1000}); err != nil {
		t.Fatal(err)
	}
	rewrite(t, dir, func(ts map[string]safetensors.Tensor) {
		v, _ := ts[victim].Float32s()
		ts[victim] = safetensors.FromFloat64(ts[victim].Shape, func() []float64 {
			w := make([]float64, len(v))
			for i, x := range v {
				w[i] = float64(x)
			}
			return w
		}())
	})
	loaded, err := Load(testBackend(t), dir)
	if err != nil {
		t.Fatalf("F64 tensor: %v", err)
	}
	sameBits(t, "F64 shard", m, loaded)
}

func TestConfigDType(t *testing.T) {
	base, err := tinyConfigs["qwen2-tied"].marshalHF()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		fields map[string]any // replaced in config.json; nil removes
		want   string
		err    []string
	}{
		{map[string]any{"torch_dtype": nil}, "float32", nil},
		{map[string]any{"torch_dtype": "bfloat16"}, "bfloat16", nil},
		{map[string]any{"torch_dtype": "float16"}, "float16", nil},
		{map[string]any{"torch_dtype": nil, "dtype": "bfloat16"}, "bfloat16", nil},
		{map[string]any{"torch_dtype": "float32", "dtype": "bfloat16"}, "bfloat16", nil},
		{map[string]any{"torch_dtype": "float64"}, "", []string{`"torch_dtype"`, "float64"}},
		{map[string]any{"dtype": "int8"}, "", []string{`"dtype"`, "int8"}},
	}
	for _, tc := range tests {
		var h map[string]any
		if err := json.Unmarshal(base, &h); err != nil {
			t.Fatal(err)
		}
		for k, v := range tc.fields {
			if v == nil {
				delete(h, k)
			} else {
				h[k] = v
			}
		}
		data, _ := json.Marshal(h)
		c, err := parseConfig(data)
		if tc.err != nil {
			for _, w := range tc.err {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("%v: error %v, want one mentioning %s", tc.fields, err, w)
				}
			}
			continue
		}
		if err != nil || c.DType != tc.want {
			t.Errorf("%v: DType %q (%v), want %q", tc.fields, c.DType, err, tc.want)
		}
	}
	bad := tinyConfigs["gpt-gelu"]
	bad.DType = "int8"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "DType") {
		t.Errorf("Validate(DType int8) = %v, want an error naming DType", err)
	}
}

// An exact save (a training checkpoint) of a bfloat16 model keeps float32
// weights, so loading gives the same bits, while config.json still says
// bfloat16 and the next ordinary save writes bfloat16 again.
func TestSaveExactKeepsFloat32(t *testing.T) {
	cfg := tinyConfigs["llama3-rope"]
	cfg.DType = "bfloat16"
	m, err := New(testBackend(t), cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := m.SaveWith(dir, SaveOptions{Exact: true}); err != nil {
		t.Fatal(err)
	}
	raw, _ := rawTensors(t, dir)
	for name, x := range raw {
		if x.DType != "F32" {
			t.Errorf("exact save: tensor %s stored as %s, want F32", name, x.DType)
		}
	}
	loaded, err := Load(testBackend(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Config().DType != "bfloat16" {
		t.Errorf("exact save: loaded DType %q, want bfloat16", loaded.Config().DType)
	}
	sameBits(t, "exact save", m, loaded)
	again := t.TempDir()
	if err := loaded.Save(again); err != nil {
		t.Fatal(err)
	}
	raw, _ = rawTensors(t, again)
	for name, x := range raw {
		if x.DType != "BF16" {
			t.Errorf("export after an exact save: tensor %s stored as %s, want BF16", name, x.DType)
		}
	}
}
