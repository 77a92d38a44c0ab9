// Package checksum records what a directory written whole holds (a training
// checkpoint, a saved agent, a reference model) in a manifest,
// checksums.json, and checks the directory against it before it is loaded,
// so that a byte changed on disk after the write is found and named: the
// file, and in a safetensors file the tensor whose bytes differ.
//
//	err := checksum.Write(dir)         // last, once every other file of dir is written
//	found, err := checksum.Verify(dir) // before loading; found is false when dir has no manifest
//
// The manifest lists every regular file under its directory by its path
// (with "/"), with its size and SHA-256 (the digest sha256sum prints), and
// for a .safetensors file the byte range and CRC-32C (Castagnoli) of each
// tensor's data; the file's SHA-256 finds a change, the tensors' CRCs say
// where it is (bytes outside every tensor are the header):
//
//	{
//	  "format": "hacrl-checksums-1",
//	  "files": {
//	    "config.json": {"size": 712, "sha256": "5d41…"},
//	    "model.safetensors": {"size": 2471968, "sha256": "a3f0…", "tensors": {
//	      "lm_head.weight": {"offsets": [1240, 263384], "crc32c": "9c2e04d1"}, …}},
//	    "agents/a/checksums.json": {"size": 2031, "sha256": "77b1…"}
//	  }
//	}
//
// A subdirectory with a manifest of its own (an agent inside a checkpoint)
// is listed by that manifest alone, and Verify checks it in turn: each
// directory that has a manifest can be checked, and copied, on its own.
// Files added after the write (not in the manifest) are not checked.
//
// Write reads each file once, right after it was written (from the page
// cache), and Verify reads each once: a pass over the data at the speed of
// SHA-256, the files hashed in parallel.
package checksum

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/hacrl/hacrl/internal/atomicfile"
	"github.com/hacrl/hacrl/safetensors"
)

// FileName is the manifest's name inside the directory it describes.
const FileName = "checksums.json"

// format names the manifest's layout.
const format = "hacrl-checksums-1"

// Manifest is the content of checksums.json.
type Manifest struct {
	Format string          `json:"format"`
	Files  map[string]File `json:"files"` // by path relative to the directory, with "/"
}

// File is one file of a manifest.
type File struct {
	Size    int64             `json:"size"`
	SHA256  string            `json:"sha256"`
	Tensors map[string]Tensor `json:"tensors,omitempty"` // a safetensors file's tensors, by name
}

// Tensor is the data of one tensor of a safetensors file.
type Tensor struct {
	Offsets [2]int64 `json:"offsets"` // [begin, end) in the file
	CRC32C  string   `json:"crc32c"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Write hashes every file under dir and writes dir/checksums.json
// atomically. Call it when dir is complete: before the directory is renamed
// into place (atomicfile.WriteDir's fill), after the manifests of its
// subdirectories.
func Write(dir string) error {
	names, err := list(dir)
	if err != nil {
		return fmt.Errorf("checksum: %w", err)
	}
	m := Manifest{Format: format, Files: make(map[string]File, len(names))}
	files := make([]File, len(names))
	err = parallel(len(names), func(i int) error {
		f, err := describe(dir, names[i])
		files[i] = f
		return err
	})
	if err != nil {
		return fmt.Errorf("checksum: %w", err)
	}
	for i, n := range names {
		m.Files[n] = files[i]
	}
	data, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return fmt.Errorf("checksum: %w", err)
	}
	return atomicfile.WriteFile(filepath.Join(dir, FileName), append(data, '\n'))
}

// list returns the paths (relative, with "/") of the files a manifest of
// dir lists: every regular file but the manifest itself, and only the
// manifest of a subdirectory that has one.
func list(dir string) ([]string, error) {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			if rel == "." {
				return nil
			}
			if _, err := os.Lstat(filepath.Join(p, FileName)); err == nil {
				names = append(names, rel+"/"+FileName)
				return fs.SkipDir
			}
			return nil
		case rel == FileName:
			return nil
		case !d.Type().IsRegular():
			return fmt.Errorf("%s is not a regular file", p)
		}
		names = append(names, rel)
		return nil
	})
	slices.Sort(names)
	return names, err
}

// describe hashes one file, and the tensors of a safetensors file.
func describe(dir, name string) (File, error) {
	path := filepath.Join(dir, filepath.FromSlash(name))
	var f File
	if strings.HasSuffix(name, ".safetensors") {
		st, err := safetensors.Open(path)
		if err != nil {
			return f, err
		}
		f.Tensors = make(map[string]Tensor, len(st.Names()))
		for _, n := range st.Names() {
			b, e, _ := st.Range(n)
			f.Tensors[n] = Tensor{Offsets: [2]int64{b, e}}
		}
		st.Close()
	}
	sum, crcs, size, err := hashFile(path, f.Tensors)
	if err != nil {
		return f, err
	}
	f.Size, f.SHA256 = size, sum
	for n, t := range f.Tensors {
		t.CRC32C = crcs[n]
		f.Tensors[n] = t
	}
	return f, nil
}

// span is a tensor's byte range and the CRC of the bytes read of it.
type span struct {
	name       string
	begin, end int64
	crc        uint32
}

// hashFile reads path once and returns its SHA-256, the CRC-32C of each
// tensor's byte range (hex) and its size.
func hashFile(path string, tensors map[string]Tensor) (string, map[string]string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", nil, 0, err
	}
	defer f.Close()
	spans := make([]span, 0, len(tensors))
	for n, t := range tensors {
		spans = append(spans, span{name: n, begin: t.Offsets[0], end: t.Offsets[1]})
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.begin, b.begin) })
	h := sha256.New()
	buf := make([]byte, 1<<20)
	var pos int64
	next := 0 // the first span that may still overlap what is read
	for {
		n, err := f.Read(buf)
		chunk, end := buf[:n], pos+int64(n)
		h.Write(chunk)
		for i := next; i < len(spans) && spans[i].begin < end; i++ {
			s := &spans[i]
			if lo, hi := max(s.begin, pos), min(s.end, end); lo < hi {
				s.crc = crc32.Update(s.crc, castagnoli, chunk[lo-pos:hi-pos])
			}
			if s.end <= end && i == next {
				next++
			}
		}
		pos = end
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", nil, 0, fmt.Errorf("checksum: %w", err)
		}
	}
	crcs := make(map[string]string, len(spans))
	for _, s := range spans {
		if s.end <= pos { // a tensor the file no longer reaches has no CRC
			crcs[s.name] = fmt.Sprintf("%08x", s.crc)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), crcs, pos, nil
}

// parallel runs do(0..n-1) on up to GOMAXPROCS goroutines and returns the
// error of the lowest index that failed.
func parallel(n int, do func(i int) error) error {
	errs := make([]error, n)
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(n, runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				errs[i] = do(i)
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Error is a directory whose files differ from its manifest.
type Error struct {
	Manifest string    // the manifest's path
	Problems []Problem // one per file that differs, in path order
}

// Problem is one file that differs from its manifest.
type Problem struct {
	Path    string   // the file's path
	Tensors []string // for a safetensors file, the tensors whose bytes differ
	Reason  string   // what differs, in words
}

func (p Problem) String() string { return p.Path + ": " + p.Reason }

func (e *Error) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.String())
	}
	fmt.Fprintf(&b, " (changed since it was written with its checksums in %s; if the change was deliberate, delete that file to load the directory unchecked)", e.Manifest)
	return b.String()
}

// ErrMismatch is wrapped by every *Error: errors.Is(err, ErrMismatch) tells
// a damaged directory from one that could not be read.
var ErrMismatch = errors.New("checksum mismatch")

func (e *Error) Is(target error) bool { return target == ErrMismatch }

// Verify checks dir against its manifest, and the subdirectories that have
// their own against theirs. It returns found false and no error when dir
// has no checksums.json (a directory not written by hacrl, or written before
// manifests were); an *Error naming each file, and each tensor, that
// differs; or another error when the manifest cannot be read.
func Verify(dir string) (found bool, err error) {
	path := filepath.Join(dir, FileName)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return true, fmt.Errorf("checksum: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return true, &Error{Manifest: path, Problems: []Problem{{Path: path, Reason: fmt.Sprintf("not a manifest: %v", err)}}}
	}
	if m.Format != format {
		return true, &Error{Manifest: path, Problems: []Problem{{Path: path, Reason: fmt.Sprintf("format %q, want %q", m.Format, format)}}}
	}
	names := slices.Sorted(maps.Keys(m.Files))
	problems := make([]*Problem, len(names))
	nested := make([]error, len(names))
	err = parallel(len(names), func(i int) error {
		name := names[i]
		if !filepath.IsLocal(filepath.FromSlash(name)) {
			problems[i] = &Problem{Path: path, Reason: fmt.Sprintf("lists %q, a path outside its directory", name)}
			return nil
		}
		p, err := check(dir, name, m.Files[name])
		if err != nil {
			return err
		}
		problems[i] = p
		if p == nil && strings.HasSuffix(name, "/"+FileName) {
			_, nested[i] = Verify(filepath.Join(dir, filepath.FromSlash(strings.TrimSuffix(name, "/"+FileName))))
		}
		return nil
	})
	if err != nil {
		return true, err
	}
	e := &Error{Manifest: path}
	for i := range names {
		if problems[i] != nil {
			e.Problems = append(e.Problems, *problems[i])
		}
		var sub *Error
		switch {
		case errors.As(nested[i], &sub):
			e.Problems = append(e.Problems, sub.Problems...)
		case nested[i] != nil:
			return true, nested[i]
		}
	}
	if len(e.Problems) > 0 {
		return true, e
	}
	return true, nil
}

// check compares one file with its manifest entry: nil when it matches.
func check(dir, name string, want File) (*Problem, error) {
	path := filepath.Join(dir, filepath.FromSlash(name))
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &Problem{Path: path, Reason: "missing"}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checksum: %w", err)
	}
	if !st.Mode().IsRegular() {
		return &Problem{Path: path, Reason: "not a regular file"}, nil
	}
	sum, crcs, size, err := hashFile(path, want.Tensors)
	if err != nil {
		return nil, err
	}
	if sum == want.SHA256 && size == want.Size {
		return nil, nil
	}
	p := &Problem{Path: path}
	for _, n := range slices.Sorted(maps.Keys(want.Tensors)) {
		if crcs[n] != want.Tensors[n].CRC32C {
			p.Tensors = append(p.Tensors, n)
		}
	}
	var what string
	switch {
	case len(p.Tensors) > 0:
		what = "the bytes of " + tensorList(p.Tensors) + " differ"
	case len(want.Tensors) > 0:
		what = "its header differs (no tensor's bytes do)"
	default:
		what = "its content differs"
	}
	if size != want.Size {
		p.Reason = fmt.Sprintf("%d bytes, the manifest says %d; %s", size, want.Size, what)
	} else {
		p.Reason = fmt.Sprintf("%s (SHA-256 %s, the manifest says %s)", what, short(sum), short(want.SHA256))
	}
	return p, nil
}

// tensorList names up to three tensors, then counts the others.
func tensorList(names []string) string {
	const most = 3
	q := make([]string, 0, most)
	for _, n := range names[:min(len(names), most)] {
		q = append(q, fmt.Sprintf("%q", n))
	}
	s := "tensor " + q[0]
	if len(names) > 1 {
		s = "tensors " + strings.Join(q, ", ")
	}
	if len(names) > most {
		s += fmt.Sprintf(" and %d more", len(names)-most)
	}
	return s
}

func short(sum string) string { return sum[:min(len(sum), 12)] + "…" }
