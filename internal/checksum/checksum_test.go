package checksum

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/internal/pyenv"
	"github.com/hacrl/hacrl/safetensors"
)

// writeDir fills dir with what a saved agent holds, in small: a JSON file,
// a safetensors file of three tensors (with metadata), and a file in a
// subdirectory.
func writeDir(t *testing.T, dir string) {
	t.Helper()
	vals := func(n int, base float32) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = base + float32(i)
		}
		return v
	}
	err := safetensors.Write(filepath.Join(dir, "model.safetensors"), map[string]safetensors.Tensor{
		"a.weight": safetensors.FromFloat32([]int{4, 3}, vals(12, 1)),
		"b.weight": safetensors.FromFloat32([]int{5}, vals(5, 100)),
		"c.bias":   safetensors.FromFloat32([]int{2, 2}, vals(4, -7)),
	}, map[string]string{"format": "pt"})
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"config.json": `{"model_type": "llama"}` + "\n", "sub/notes.txt": "kept\n"} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestManifestMatchesPython: the manifest Write records is the one an
// independent Python implementation (hashlib's SHA-256, the safetensors
// format's header) computes for the same directory.
func TestManifestMatchesPython(t *testing.T) {
	dir := t.TempDir()
	writeDir(t, dir)
	if err := Write(dir); err != nil {
		t.Fatal(err)
	}
	var got, want Manifest
	data, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	pyenv.Run(t, "testdata/manifest.py", map[string]string{"dir": dir}, &want)
	if got.Format != format {
		t.Errorf("format %q, want %q", got.Format, format)
	}
	if len(want.Files) != 3 || !reflect.DeepEqual(got.Files, want.Files) {
		t.Errorf("manifest:\n%+v\nPython computes:\n%+v", got.Files, want.Files)
	}
}

// flip inverts 16 bytes of a file from offset off (from its end when
// negative), as the fault campaign did.
func flip(t *testing.T, path string, off int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if off < 0 {
		off += int64(len(data))
	}
	for i := off; i < off+16 && i < int64(len(data)); i++ {
		data[i] ^= 0xff
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// tensorOffset is where a tensor's data begins in a safetensors file.
func tensorOffset(t *testing.T, path, name string) int64 {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, _, ok := f.Range(name)
	if !ok {
		t.Fatalf("%s has no tensor %q", path, name)
	}
	return b
}

// TestVerifyNamesWhatChanged: every change to a file of a directory, or of
// a subdirectory with its own manifest, is found and named — the file, and
// in a safetensors file the tensors or the header.
func TestVerifyNamesWhatChanged(t *testing.T) {
	cases := []struct {
		name   string
		change func(t *testing.T, dir string)
		want   []string // in the error, with dir for "DIR"
		file   string   // the Problem's path, relative to dir
		tensor []string // its Tensors
	}{
		{"one tensor", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "model.safetensors")
			flip(t, p, tensorOffset(t, p, "b.weight")+2)
		}, []string{`DIR/model.safetensors: the bytes of tensor "b.weight" differ`}, "model.safetensors", []string{"b.weight"}},
		{"two tensors", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "model.safetensors")
			flip(t, p, tensorOffset(t, p, "b.weight")-8) // the end of a.weight and the start of b.weight
		}, []string{`tensors "a.weight", "b.weight" differ`}, "model.safetensors", []string{"a.weight", "b.weight"}},
		{"header", func(t *testing.T, dir string) {
			flip(t, filepath.Join(dir, "model.safetensors"), 20)
		}, []string{"DIR/model.safetensors: its header differs"}, "model.safetensors", nil},
		{"truncated", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "model.safetensors")
			if err := os.Truncate(p, tensorOffset(t, p, "c.bias")+4); err != nil {
				t.Fatal(err)
			}
		}, []string{"DIR/model.safetensors:", "bytes, the manifest says", `tensor "c.bias" differ`}, "model.safetensors", []string{"c.bias"}},
		{"json", func(t *testing.T, dir string) {
			flip(t, filepath.Join(dir, "config.json"), 2)
		}, []string{"DIR/config.json: its content differs"}, "config.json", nil},
		{"missing", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "config.json")); err != nil {
				t.Fatal(err)
			}
		}, []string{"DIR/config.json: missing"}, "config.json", nil},
		{"in a subdirectory's manifest", func(t *testing.T, dir string) {
			flip(t, filepath.Join(dir, "sub", "notes.txt"), 0)
		}, []string{"DIR/sub/notes.txt: its content differs", "its checksums in DIR/checksums.json"}, "sub/notes.txt", nil},
		{"a subdirectory's manifest", func(t *testing.T, dir string) {
			flip(t, filepath.Join(dir, "sub", FileName), -20)
		}, []string{"DIR/sub/checksums.json: its content differs"}, "sub/checksums.json", nil},
		{"the manifest", func(t *testing.T, dir string) {
			flip(t, filepath.Join(dir, FileName), 0)
		}, []string{"DIR/checksums.json: not a manifest"}, "checksums.json", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeDir(t, dir)
			if err := Write(filepath.Join(dir, "sub")); err != nil {
				t.Fatal(err)
			}
			if err := Write(dir); err != nil {
				t.Fatal(err)
			}
			if found, err := Verify(dir); !found || err != nil {
				t.Fatalf("intact directory: found %v, %v", found, err)
			}
			c.change(t, dir)
			found, err := Verify(dir)
			var e *Error
			if !found || !errors.As(err, &e) || !errors.Is(err, ErrMismatch) {
				t.Fatalf("Verify = %v, %v; want an *Error", found, err)
			}
			for _, w := range c.want {
				if w = strings.ReplaceAll(w, "DIR", dir); !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if len(e.Problems) != 1 || e.Problems[0].Path != filepath.Join(dir, filepath.FromSlash(c.file)) || !reflect.DeepEqual(e.Problems[0].Tensors, c.tensor) {
				t.Errorf("problems %+v, want one in %s with tensors %v", e.Problems, c.file, c.tensor)
			}
		})
	}
}

// A directory without a manifest (a Hugging Face download) is not checked.
func TestVerifyWithoutManifest(t *testing.T) {
	dir := t.TempDir()
	writeDir(t, dir)
	if found, err := Verify(dir); found || err != nil {
		t.Errorf("Verify without a manifest = %v, %v; want false, nil", found, err)
	}
}
