package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// equalTensors reports whether two tensor maps hold the same names, dtypes,
// shapes (nil and empty alike) and bytes.
func equalTensors(a, b map[string]Tensor) bool {
	if len(a) != len(b) {
		return false
	}
	for name, ta := range a {
		tb, ok := b[name]
		if !ok || ta.DType != tb.DType || !slices.Equal(ta.Shape, tb.Shape) || !bytes.Equal(ta.Data, tb.Data) {
			return false
		}
	}
	return true
}

func TestKnownFileBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "one.safetensors")
	if err := Write(path, map[string]Tensor{"x": FromFloat32([]int{2}, []float32{1, 2})}, nil); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// 54 bytes of JSON padded with 2 spaces to 56 = 0x38, then 1.0f and 2.0f.
	want := []byte("\x38\x00\x00\x00\x00\x00\x00\x00" +
		`{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}  ` +
		"\x00\x00\x80\x3f\x00\x00\x00\x40")
	if !bytes.Equal(got, want) {
		t.Fatalf("file bytes:\n got %q\nwant %q", got, want)
	}
	tensors, meta, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(meta) != 0 {
		t.Errorf("metadata = %v, want empty", meta)
	}
	vals, err := tensors["x"].Float32s()
	if err != nil || !slices.Equal(vals, []float32{1, 2}) || !slices.Equal(tensors["x"].Shape, []int{2}) {
		t.Errorf("x = %v %v (err %v), want [1 2] shape [2]", vals, tensors["x"].Shape, err)
	}
}

func TestRoundTripAllDTypes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tensors := map[string]Tensor{}
	for dtype, size := range dtypeSizes {
		for i, shape := range [][]int{{2, 3}, {}, {0, 4}, {5}} {
			n, _ := NumElements(shape)
			data := make([]byte, n*size)
			for j := range data {
				data[j] = byte(rng.Uint32())
			}
			if dtype == "BOOL" {
				for j := range data {
					data[j] &= 1
				}
			}
			tensors[dtype+"/"+string(rune('a'+i))] = Tensor{DType: dtype, Shape: shape, Data: data}
		}
	}
	meta := map[string]string{"format": "pt", "note": "héllo \"quoted\"\n"}
	dir := t.TempDir()
	path := filepath.Join(dir, "all.safetensors")
	if err := Write(path, tensors, meta); err != nil {
		t.Fatal(err)
	}
	got, gotMeta, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if !equalTensors(got, tensors) {
		t.Error("tensors differ after the round trip")
	}
	if len(gotMeta) != 2 || gotMeta["format"] != "pt" || gotMeta["note"] != meta["note"] {
		t.Errorf("metadata = %q, want %q", gotMeta, meta)
	}

	// Deterministic bytes, an 8-aligned header, and no temporary files left.
	raw1, _ := os.ReadFile(path)
	if err := Write(path, tensors, meta); err != nil {
		t.Fatal(err)
	}
	raw2, _ := os.ReadFile(path)
	if !bytes.Equal(raw1, raw2) {
		t.Error("writing the same tensors twice gave different bytes")
	}
	if n := binary.LittleEndian.Uint64(raw1); n%8 != 0 {
		t.Errorf("header length %d is not a multiple of 8", n)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the written file", len(entries))
	}
}

func TestWriteErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		path    string
		tensors map[string]Tensor
		want    string
	}{
		{"short data", "a.safetensors", map[string]Tensor{"w": {DType: "F32", Shape: []int{3}, Data: make([]byte, 8)}}, `tensor "w": invalid safetensors data: data has 8 bytes, want 12 for F32 [3]`},
		{"unknown dtype", "b.safetensors", map[string]Tensor{"w": {DType: "F12", Shape: []int{1}, Data: make([]byte, 4)}}, `unknown dtype "F12"`},
		{"negative dim", "c.safetensors", map[string]Tensor{"w": {DType: "U8", Shape: []int{2, -1}}}, "dimension 1 is negative"},
		{"reserved name", "d.safetensors", map[string]Tensor{"__metadata__": FromFloat32([]int{1}, []float32{1})}, "reserved for metadata"},
		{"missing dir", "no/such/dir/e.safetensors", map[string]Tensor{"w": FromFloat32([]int{1}, []float32{1})}, "no such file or directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.path)
			err := Write(path, tc.tensors, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Write error = %v, want one naming %s and containing %q", err, path, tc.want)
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a failed Write left %s behind", path)
			}
		})
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Errorf("failed writes left %d entries in the directory", len(entries))
	}
}

// rawFile builds a safetensors file by hand from a header and a data section.
func rawFile(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(b, header...), data...)
}

func TestReadCorruption(t *testing.T) {
	f32x2 := `{"dtype":"F32","shape":[2],"data_offsets":[0,8]}`
	tests := []struct {
		name string
		file []byte
		want string
	}{
		{"truncated", []byte{1, 2, 3}, "truncated file: 3 bytes"},
		{"header beyond file", rawFile(`{}`, nil)[:9], "header length 2 goes beyond the end of the 9-byte file"},
		{"header too large", binary.LittleEndian.AppendUint64(nil, 200<<20), "header length 209715200 exceeds the 104857600-byte limit"},
		{"bad JSON", rawFile(`{"x":`, nil), `bad header JSON at "x"`},
		{"not an object", rawFile(`[1]`, nil), "header is not a JSON object"},
		{"trailing bytes", rawFile(`{} x`, nil), "1 unexpected bytes after the JSON object"},
		{"unknown dtype", rawFile(`{"x":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 8)), `tensor "x": unknown dtype "F33"`},
		{"negative dim", rawFile(`{"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, make([]byte, 8)), `tensor "x": shape[0] = -2: dimension is negative`},
		{"fractional dim", rawFile(`{"x":{"dtype":"F32","shape":[1.5],"data_offsets":[0,8]}}`, make([]byte, 8)), `tensor "x": shape[0] = 1.5: want an integer`},
		{"missing offsets", rawFile(`{"x":{"dtype":"F32","shape":[2]}}`, make([]byte, 8)), `tensor "x": missing field data_offsets`},
		{"unknown field", rawFile(`{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"y":1}}`, make([]byte, 8)), `tensor "x": want {dtype, shape, data_offsets}: json: unknown field "y"`},
		{"three offsets", rawFile(`{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,4,8]}}`, make([]byte, 8)), `tensor "x": data_offsets has 3 values`},
		{"negative offset", rawFile(`{"x":{"dtype":"F32","shape":[2],"data_offsets":[-1,8]}}`, make([]byte, 8)), `tensor "x": data_offsets[0] = -1: want a non-negative integer`},
		{"offsets reversed", rawFile(`{"x":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}}`, make([]byte, 8)), `tensor "x": data_offsets [8, 0] end before they begin`},
		{"offsets out of range", rawFile(`{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 6)), `tensor "x": data_offsets [0, 8] out of range: the data section has 6 bytes`},
		{"offsets not matching shape", rawFile(`{"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, make([]byte, 8)), `tensor "x": data_offsets [0, 8] span 8 bytes, want 12 for F32 [3]`},
		{"overlap", rawFile(`{"a":`+f32x2+`,"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, make([]byte, 12)), `tensor "b": data_offsets [4, 12] overlap tensor "a", which ends at 8`},
		{"gap", rawFile(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}}`, make([]byte, 3)), `tensor "b": data_offsets [2, 3] leave a gap: the previous tensor ends at 1`},
		{"trailing data", rawFile(`{"x":`+f32x2+`}`, make([]byte, 12)), "the data section has 12 bytes but the tensors cover 8"},
		{"duplicate tensor", rawFile(`{"x":`+f32x2+`,"x":`+f32x2+`}`, make([]byte, 8)), `duplicate tensor "x"`},
		{"non-string metadata", rawFile(`{"__metadata__":{"k":1}}`, nil), `__metadata__: key "k": want a string value, got 1`},
		{"overflowing shape", rawFile(`{"x":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}}`, make([]byte, 8)), `tensor "x": shape [4294967296 4294967296]: element count overflows`},
	}
	dir := t.TempDir()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".safetensors")
			if err := os.WriteFile(path, tc.file, 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err := Read(path)
			if err == nil {
				t.Fatalf("Read succeeded, want an error containing %q", tc.want)
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Read error = %q, want ErrInvalid naming %s and containing %q", err, path, tc.want)
			}
		})
	}
}

func TestReadAcceptsUnsortedLayoutAndNullMetadata(t *testing.T) {
	// Hugging Face files may lay tensors out in any order.
	header := `{"__metadata__":null,"a":{"dtype":"U8","shape":[1],"data_offsets":[2,3]},"b":{"dtype":"I16","shape":[],"data_offsets":[0,2]}}`
	path := filepath.Join(t.TempDir(), "unsorted.safetensors")
	if err := os.WriteFile(path, rawFile(header, []byte{0xfe, 0xff, 7}), 0o644); err != nil {
		t.Fatal(err)
	}
	tensors, meta, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	a, errA := tensors["a"].Int64s()
	b, errB := tensors["b"].Int64s()
	if errA != nil || errB != nil || !slices.Equal(a, []int64{7}) || !slices.Equal(b, []int64{-2}) || len(meta) != 0 {
		t.Errorf("a = %v (%v), b = %v (%v), meta = %v; want [7], [-2], empty", a, errA, b, errB, meta)
	}
}

func TestReadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent.safetensors")
	_, _, err := Read(path)
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), path) {
		t.Errorf("Read error = %v, want ErrNotExist naming the file", err)
	}
}

func FuzzRead(f *testing.F) {
	f.Add(rawFile(`{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 8)))
	f.Add(rawFile(`{"__metadata__":{"a":"b"},"s":{"dtype":"BOOL","shape":[],"data_offsets":[0,1]}}`, []byte{1}))
	f.Add([]byte{})
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, file []byte) {
		path := filepath.Join(dir, "in.safetensors")
		if err := os.WriteFile(path, file, 0o644); err != nil {
			t.Fatal(err)
		}
		tensors, meta, err := Read(path)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Read error %v does not wrap ErrInvalid", err)
			}
			return
		}
		for name, tensor := range tensors {
			if err := tensor.Validate(); err != nil {
				t.Fatalf("Read returned invalid tensor %q: %v", name, err)
			}
		}
		out := filepath.Join(dir, "out.safetensors")
		if err := Write(out, tensors, meta); err != nil {
			t.Fatalf("Write of what Read returned failed: %v", err)
		}
		again, meta2, err := Read(out)
		if err != nil || !equalTensors(again, tensors) || len(meta2) != len(meta) {
			t.Fatalf("rewritten file reads back differently (err %v)", err)
		}
	})
}
