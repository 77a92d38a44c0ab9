package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.txt")
	if err := WriteFile(path, []byte("old")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := Write(path, func(w io.Writer) error {
		io.WriteString(w, "partial")
		return boom
	})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), path) {
		t.Errorf("Write error = %v, want boom naming %s", err, path)
	}
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Errorf("after a failed write the file holds %q, want the old content", got)
	}
	if err := WriteFile(path, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "new" {
		t.Errorf("file holds %q, want %q", got, "new")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want 1 (no temporary files left)", len(entries))
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Errorf("mode = %v, want 0644", st.Mode().Perm())
	}
	if err := WriteFile(filepath.Join(dir, "missing", "f"), nil); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
}

func TestIsTemp(t *testing.T) {
	for name, want := range map[string]bool{".f.txt.tmp-123": true, "f.txt": false, "events.out.tfevents.1.h": false, ".hidden": false} {
		if got := IsTemp(name); got != want {
			t.Errorf("IsTemp(%q) = %v, want %v", name, got, want)
		}
	}
}

// WriteDir replaces a directory whole, and a failing fill leaves the old
// one and no temporary directory behind.
func TestWriteDir(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "ckpt", "step-1")
	write := func(content string, fail bool) error {
		return WriteDir(dst, func(tmp string) error {
			if err := os.WriteFile(filepath.Join(tmp, "f"), []byte(content), 0o644); err != nil {
				return err
			}
			if fail {
				return os.ErrInvalid
			}
			return nil
		})
	}
	for _, tc := range []struct {
		content string
		fail    bool
		want    string
	}{{"one", false, "one"}, {"two", false, "two"}, {"three", true, "two"}} {
		if err := write(tc.content, tc.fail); (err != nil) != tc.fail {
			t.Fatalf("WriteDir(%q): %v", tc.content, err)
		}
		got, err := os.ReadFile(filepath.Join(dst, "f"))
		if err != nil || string(got) != tc.want {
			t.Fatalf("after writing %q (fail %v): %q %v, want %q", tc.content, tc.fail, got, err, tc.want)
		}
		entries, _ := os.ReadDir(filepath.Dir(dst))
		if len(entries) != 1 {
			t.Fatalf("after writing %q: %d entries beside the directory, want it alone", tc.content, len(entries))
		}
	}
}
