// Package flip damages files for tests the way a failing disk or a bad copy
// does: it inverts a few bytes in place, in a file or inside one tensor of a
// safetensors file, so that a test can check the damage is found and named.
package flip

import (
	"os"
	"testing"

	"github.com/hacrl/hacrl/safetensors"
)

// N is how many bytes Bytes and Tensor invert.
const N = 16

// Bytes inverts N bytes of the file at path from offset off (its middle
// when off is negative), or fewer where the file ends.
func Bytes(t testing.TB, path string, off int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if off < 0 {
		off = int64(len(data))/2 - N/2
	}
	for i := off; i < off+N && i < int64(len(data)); i++ {
		data[i] ^= 0xff
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Tensor inverts N bytes in the middle of the data of one tensor of the
// safetensors file at path (the middle one in name order) and returns its
// name.
func Tensor(t testing.TB, path string) string {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	name := f.Names()[len(f.Names())/2]
	b, e, _ := f.Range(name)
	f.Close()
	Bytes(t, path, (b+e)/2-N/2)
	return name
}
