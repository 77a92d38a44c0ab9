package safetensors

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// testEntries returns F32 entries named t0…t(n-1) of the given element
// counts, filled from a seeded generator, with their values.
func testEntries(sizes []int) ([]Entry, map[string][]float32) {
	rng := rand.New(rand.NewPCG(1, 2))
	var entries []Entry
	values := map[string][]float32{}
	for i, n := range sizes {
		v := make([]float32, n)
		for j := range v {
			v[j] = rng.Float32()*2 - 1
		}
		name := "t" + string(rune('a'+i))
		values[name] = v
		t := FromFloat32([]int{n}, v)
		entries = append(entries, Entry{Name: name, DType: "F32", Shape: t.Shape, Data: func() ([]byte, error) { return t.Data, nil }})
	}
	return entries, values
}

func TestWriteShardedLayout(t *testing.T) {
	tests := []struct {
		name   string
		sizes  []int // elements (4 bytes each)
		limit  int64
		shards [][]string // tensor names per shard; one shard means no index
	}{
		{"fits in one", []int{3, 4, 5}, 0, [][]string{{"ta", "tb", "tc"}}},
		{"exactly at the limit", []int{2, 2}, 16, [][]string{{"ta", "tb"}}},
		{"split in order", []int{2, 2, 2}, 16, [][]string{{"ta", "tb"}, {"tc"}}},
		{"a tensor above the limit gets its own shard", []int{1, 10, 1}, 16, [][]string{{"ta"}, {"tb"}, {"tc"}}},
		{"no greedy packing", []int{3, 3, 1, 3}, 16, [][]string{{"ta"}, {"tb", "tc"}, {"td"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			entries, values := testEntries(tc.sizes)
			files, err := WriteSharded(dir, "model", entries, ShardOptions{MaxShardSize: tc.limit, Metadata: map[string]string{"format": "pt"}})
			if err != nil {
				t.Fatal(err)
			}
			var s *Files
			if len(tc.shards) == 1 {
				if !slices.Equal(files, []string{"model.safetensors"}) {
					t.Fatalf("files = %v, want [model.safetensors]", files)
				}
				s, err = OpenSingle(filepath.Join(dir, "model.safetensors"))
			} else {
				want := []string{}
				for i := range tc.shards {
					want = append(want, "model-0000"+string(rune('1'+i))+"-of-0000"+string(rune('0'+len(tc.shards)))+".safetensors")
				}
				want = append(want, "model.safetensors.index.json")
				if !slices.Equal(files, want) {
					t.Fatalf("files = %v, want %v", files, want)
				}
				checkIndexJSON(t, filepath.Join(dir, "model.safetensors.index.json"), tc.sizes, tc.shards, want)
				s, err = OpenIndex(filepath.Join(dir, "model.safetensors.index.json"))
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for i, shard := range tc.shards {
				f := s.Files()[i]
				if !slices.Equal(f.Names(), shard) {
					t.Errorf("shard %d holds %v, want %v", i, f.Names(), shard)
				}
				if f.Metadata()["format"] != "pt" {
					t.Errorf("shard %d metadata = %v, want format pt", i, f.Metadata())
				}
			}
			for name, want := range values {
				f, ok := s.Lookup(name)
				if !ok {
					t.Fatalf("tensor %s not found", name)
				}
				var got []float32
				if err := f.Float32Chunks(name, func(first int, c []float32) error {
					if first != len(got) {
						t.Fatalf("chunk at %d, want %d", first, len(got))
					}
					got = append(got, c...)
					return nil
				}); err != nil || !slices.Equal(got, want) {
					t.Errorf("%s = %v (%v), want %v", name, got, err, want)
				}
			}
		})
	}
}

// checkIndexJSON checks the index against the published layout:
// {"metadata": {"total_size": bytes}, "weight_map": {tensor: shard}}.
func checkIndexJSON(t *testing.T, path string, sizes []int, shards [][]string, files []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var idx struct {
		Metadata  map[string]int64  `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(data, &idx); err != nil {
		t.Fatalf("index %s: %v", data, err)
	}
	total := 0
	for _, n := range sizes {
		total += 4 * n
	}
	if len(idx.Metadata) != 1 || idx.Metadata["total_size"] != int64(total) {
		t.Errorf("index metadata = %v, want total_size %d", idx.Metadata, total)
	}
	want := map[string]string{}
	for i, shard := range shards {
		for _, name := range shard {
			want[name] = files[i]
		}
	}
	if len(idx.WeightMap) != len(want) {
		t.Errorf("weight_map = %v, want %v", idx.WeightMap, want)
	}
	for k, v := range want {
		if idx.WeightMap[k] != v {
			t.Errorf("weight_map[%s] = %q, want %q", k, idx.WeightMap[k], v)
		}
	}
}

// TestWriteShardedRemovesStaleFiles saves sharded, then single, then
// sharded with fewer shards: each time only the new layout's files remain,
// and unrelated files are kept.
func TestWriteShardedRemovesStaleFiles(t *testing.T) {
	dir := t.TempDir()
	keep := filepath.Join(dir, "optimizer.safetensors")
	if err := os.WriteFile(keep, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	entries, _ := testEntries([]int{2, 2, 2})
	steps := []struct {
		limit int64
		index bool
		want  []string
	}{
		{8, false, []string{"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors", "model.safetensors.index.json"}},
		{0, false, []string{"model.safetensors"}},
		{8, false, []string{"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors", "model.safetensors.index.json"}},
		{0, true, []string{"model.safetensors", "model.safetensors.index.json"}},
		{16, false, []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "model.safetensors.index.json"}},
	}
	for i, st := range steps {
		if _, err := WriteSharded(dir, "model", entries, ShardOptions{MaxShardSize: st.limit, AlwaysIndex: st.index}); err != nil {
			t.Fatal(err)
		}
		ents, _ := os.ReadDir(dir)
		var got []string
		for _, e := range ents {
			got = append(got, e.Name())
		}
		want := append(slices.Clone(st.want), "optimizer.safetensors")
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("step %d: files %v, want %v", i, got, want)
		}
		if st.index { // the index of a single file names it for every tensor
			s, err := OpenIndex(filepath.Join(dir, "model.safetensors.index.json"))
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Files()) != 1 || filepath.Base(s.Files()[0].Path()) != "model.safetensors" || !slices.Equal(s.Names(), []string{"ta", "tb", "tc"}) {
				t.Errorf("step %d: index of one file opens %d files with %v", i, len(s.Files()), s.Names())
			}
			s.Close()
		}
	}
}

func TestOpenIndexErrors(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string) // after a valid two-shard save of ta, tb
		want  []string                       // substrings of the error
	}{
		{"missing shard", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "model-00002-of-00002.safetensors"))
		}, []string{"model.safetensors.index.json", "model-00002-of-00002.safetensors", `"tb"`, "missing"}},
		{"index names an absent tensor", func(t *testing.T, dir string) {
			writeIndex(t, dir, `{"metadata":{"total_size":16},"weight_map":{"ta":"model-00001-of-00002.safetensors","tb":"model-00002-of-00002.safetensors","tz":"model-00002-of-00002.safetensors"}}`)
		}, []string{"model-00002-of-00002.safetensors", `"tz"`, "not in it"}},
		{"shard tensor not in the index", func(t *testing.T, dir string) {
			x := FromFloat32([]int{1}, []float32{1})
			if err := Write(filepath.Join(dir, "model-00002-of-00002.safetensors"), map[string]Tensor{"tb": x, "tc": x}, nil); err != nil {
				t.Fatal(err)
			}
		}, []string{"model-00002-of-00002.safetensors", `"tc"`, "not mapped"}},
		{"tensor in another shard than the index says", func(t *testing.T, dir string) {
			writeIndex(t, dir, `{"weight_map":{"ta":"model-00001-of-00002.safetensors","tb":"model-00001-of-00002.safetensors"}}`)
		}, []string{"model-00001-of-00002.safetensors", `"tb"`, "not in it"}},
		{"no weight_map", func(t *testing.T, dir string) {
			writeIndex(t, dir, `{"metadata":{}}`)
		}, []string{"model.safetensors.index.json", `"weight_map" is missing`}},
		{"weight_map of numbers", func(t *testing.T, dir string) {
			writeIndex(t, dir, `{"weight_map":{"ta":1}}`)
		}, []string{"model.safetensors.index.json", `"weight_map"`}},
		{"shard outside the directory", func(t *testing.T, dir string) {
			writeIndex(t, dir, `{"weight_map":{"ta":"../model-00001-of-00002.safetensors"}}`)
		}, []string{"model.safetensors.index.json", `"ta"`, "not a file name"}},
		{"not JSON", func(t *testing.T, dir string) {
			writeIndex(t, dir, `{"weight_map":`)
		}, []string{"model.safetensors.index.json", "not a JSON object"}},
		{"corrupt shard", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "model-00001-of-00002.safetensors"), []byte("12345678"), 0o644)
		}, []string{"model-00001-of-00002.safetensors", "header length"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			entries, _ := testEntries([]int{2, 2})
			if _, err := WriteSharded(dir, "model", entries, ShardOptions{MaxShardSize: 8}); err != nil {
				t.Fatal(err)
			}
			tc.setup(t, dir)
			s, err := OpenIndex(filepath.Join(dir, "model.safetensors.index.json"))
			if err == nil {
				s.Close()
				t.Fatal("OpenIndex succeeded, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func writeIndex(t *testing.T, dir, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFloat32Chunks streams tensors of every float dtype, larger than one
// chunk, and checks the values and the chunk offsets.
func TestFloat32Chunks(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	n := chunkBytes/2 + 1234 // several chunks for every dtype
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	dir := t.TempDir()
	tensors := map[string]Tensor{}
	for _, dtype := range []string{"F32", "F16", "BF16", "F64"} {
		x, err := FromFloat32As(dtype, []int{n / 2, 2}, v[:n/2*2])
		if err != nil {
			t.Fatal(err)
		}
		tensors[dtype] = x
	}
	tensors["ints"] = FromInt64([]int{1}, []int64{7})
	path := filepath.Join(dir, "x.safetensors")
	if err := Write(path, tensors, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, dtype := range []string{"F32", "F16", "BF16", "F64"} {
		want, err := tensors[dtype].Float64s()
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float32, 0, n)
		chunks := 0
		err = f.Float32Chunks(dtype, func(first int, c []float32) error {
			if first != len(got) {
				t.Fatalf("%s: chunk at %d, want %d", dtype, first, len(got))
			}
			got = append(got, c...)
			chunks++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if chunks < 2 || len(got) != len(want) {
			t.Fatalf("%s: %d values in %d chunks, want %d in several", dtype, len(got), chunks, len(want))
		}
		for i := range got {
			if got[i] != float32(want[i]) {
				t.Fatalf("%s[%d] = %v, want %v", dtype, i, got[i], want[i])
			}
		}
	}
	stop := errors.New("stop")
	if err := f.Float32Chunks("F32", func(int, []float32) error { return stop }); err != stop {
		t.Errorf("error from fn = %v, want it returned as is", err)
	}
	for _, name := range []string{"ints", "absent"} {
		err := f.Float32Chunks(name, func(int, []float32) error { return nil })
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `"`+name+`"`) {
			t.Errorf("Float32Chunks(%s) error = %v, want one naming the file and tensor", name, err)
		}
	}
	if _, _, ok := f.Info("absent"); ok {
		t.Error("Info(absent) found a tensor")
	}
	if dt, shape, ok := f.Info("BF16"); !ok || dt != "BF16" || !slices.Equal(shape, []int{n / 2, 2}) {
		t.Errorf("Info(BF16) = %s %v %v", dt, shape, ok)
	}
}
