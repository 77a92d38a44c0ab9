// Package atomicfile writes files and directories atomically: the content goes to a temporary
// file in the destination's directory, which is synced and then renamed over
// the destination, so readers see either the old file or the complete new one,
// never a partial write, even after a crash.
package atomicfile

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Write writes the content produced by fill to path atomically, with mode
// 0644. Writes through the io.Writer are buffered. On any error the temporary
// file is removed and path is left untouched.
func Write(path string, fill func(w io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			err = fmt.Errorf("write %s: %w", path, err)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err = fill(bw); err != nil {
		return err
	}
	if err = bw.Flush(); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return err
	}
	if d, derr := os.Open(dir); derr == nil { // persist the rename; best effort
		d.Sync()
		d.Close()
	}
	return nil
}

// WriteFile writes data to path atomically, with mode 0644.
func WriteFile(path string, data []byte) error {
	return Write(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// IsTemp reports whether name is the base name of a temporary file that Write
// creates (and leaves behind only if the process dies).
func IsTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp-")
}

// SyncTree flushes every file and directory under root to stable storage:
// a directory written in place before it is renamed into view (a
// checkpoint, a weights version) is then complete after a crash.
func SyncTree(root string) error {
	return filepath.WalkDir(root, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return SyncDir(p)
	})
}

// SyncDir flushes one file or directory (the entries of a directory, after
// a rename in it) to stable storage.
func SyncDir(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// WriteDir builds a directory in a temporary sibling with fill and renames
// it over dst, so dst is either the old complete directory or the new
// complete one, even after a crash (a checkpoint, a weights version).
func WriteDir(dst string, fill func(tmp string) error) error {
	parent := filepath.Dir(dst)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, ".tmp-"+filepath.Base(dst)+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := fill(tmp); err != nil {
		return err
	}
	if err := SyncTree(tmp); err != nil {
		return err
	}
	old := ""
	if _, err := os.Stat(dst); err == nil {
		old = dst + ".old"
		os.RemoveAll(old)
		if err := os.Rename(dst, old); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		return err
	}
	if old != "" {
		os.RemoveAll(old)
	}
	return SyncDir(parent)
}
