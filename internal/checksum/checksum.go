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
// (with "/") and size. A file's SHA-256 is that of its content (the digest
// sha256sum prints), except for a .safetensors file, whose header (the
// bytes before the first tensor's data) and each tensor's bytes have their
// own SHA-256, with the tensor's byte range in the file: a change is named
// by its tensor, and a file's tensors are hashed in parallel.
//
//	{
//	  "format": "hacrl-checksums-1",
//	  "files": {
//	    "config.json": {"size": 712, "sha256": "5d41…"},
//	    "model.safetensors": {"size": 2471968, "header_sha256": "a3f0…", "tensors": {
//	      "lm_head.weight": {"offsets": [1240, 263384], "sha256": "9c2e…"}, …}},
//	    "agents/a/checksums.json": {"size": 2031, "sha256": "77b1…"}
//	  }
//	}
//
// A subdirectory with a manifest of its own (an agent inside a checkpoint)
// is listed by that manifest alone, and Verify checks it in turn: each
// directory that has a manifest can be checked, and copied, on its own.
// Files added after the write (not in the manifest) are not checked.
//
// Write reads each file once more, right after it was written (from the
// page cache), and Verify reads each once: SHA-256 over every byte, the
// pieces (whole files, headers, tensors) spread over GOMAXPROCS goroutines.
package checksum

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
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

// File is one file of a manifest: SHA256 for most files; HeaderSHA256 and
// Tensors for a safetensors file.
type File struct {
	Size         int64             `json:"size"`
	SHA256       string            `json:"sha256,omitempty"`
	HeaderSHA256 string            `json:"header_sha256,omitempty"` // the bytes before the first tensor's
	Tensors      map[string]Tensor `json:"tensors,omitempty"`       // by name
}

// Tensor is the data of one tensor of a safetensors file.
type Tensor struct {
	Offsets [2]int64 `json:"offsets"` // [begin, end) in the file
	SHA256  string   `json:"sha256"`
}

// piece is a byte range of a file hashed on its own: a whole file (end
// -1: to its end), a safetensors header, or a tensor.
type piece struct {
	file       int    // index in the list of files
	tensor     string // "" for a whole file or a header
	begin, end int64
	sum        string // its SHA-256 (hex); "" when the file does not reach its end
	size       int64  // bytes read (of a whole file: its size)
}

// headerEnd is where the first tensor's data begins (the file's size when
// it has no tensor): safetensors tensors tile the file after the header.
func headerEnd(tensors map[string]Tensor, size int64) int64 {
	end := size
	for _, t := range tensors {
		end = min(end, t.Offsets[0])
	}
	return end
}

// Write hashes every file under dir and writes dir/checksums.json
// atomically. Call it when dir is complete: before the directory is renamed
// into place (atomicfile.WriteDir's fill), after the manifests of its
// subdirectories.
func Write(dir string) error {
	names, err := list(dir)
	if err != nil {
		return fmt.Errorf("checksum: %w", err)
	}
	files := make([]File, len(names))
	var pieces []*piece
	for i, name := range names {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if !strings.HasSuffix(name, ".safetensors") {
			pieces = append(pieces, &piece{file: i, end: -1})
			continue
		}
		st, err := safetensors.Open(path)
		if err != nil {
			return fmt.Errorf("checksum: %w", err)
		}
		info, err := os.Stat(path)
		if err != nil {
			st.Close()
			return fmt.Errorf("checksum: %w", err)
		}
		f := File{Size: info.Size(), Tensors: make(map[string]Tensor, len(st.Names()))}
		for _, n := range st.Names() {
			b, e, _ := st.Range(n)
			f.Tensors[n] = Tensor{Offsets: [2]int64{b, e}}
			pieces = append(pieces, &piece{file: i, tensor: n, begin: b, end: e})
		}
		st.Close()
		pieces = append(pieces, &piece{file: i, end: headerEnd(f.Tensors, f.Size)})
		files[i] = f
	}
	if err := hashPieces(dir, names, pieces); err != nil {
		return fmt.Errorf("checksum: %w", err)
	}
	for _, p := range pieces {
		f := &files[p.file]
		switch {
		case p.tensor != "":
			t := f.Tensors[p.tensor]
			t.SHA256 = p.sum
			f.Tensors[p.tensor] = t
		case f.Tensors != nil:
			f.HeaderSHA256 = p.sum
		default:
			f.Size, f.SHA256 = p.size, p.sum
		}
	}
	m := Manifest{Format: format, Files: make(map[string]File, len(names))}
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

// hashPieces computes every piece's SHA-256 on up to GOMAXPROCS
// goroutines, the largest pieces first. A piece the file does not reach
// the end of gets no sum.
func hashPieces(dir string, names []string, pieces []*piece) error {
	order := slices.Clone(pieces)
	slices.SortStableFunc(order, func(a, b *piece) int {
		if (a.end < 0) != (b.end < 0) { // whole files first: their size is not known
			return cmp.Compare(a.end, b.end)
		}
		return cmp.Compare(b.end-b.begin, a.end-a.begin)
	})
	return parallel(len(order), func(i int) error {
		p := order[i]
		return p.hash(filepath.Join(dir, filepath.FromSlash(names[p.file])))
	})
}

// buffers are the read buffers of hash, reused from piece to piece.
var buffers = sync.Pool{New: func() any { b := make([]byte, 1<<20); return &b }}

// hash reads the piece from the file at path and sets its sum and size.
func (p *piece) hash(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var r io.Reader = f
	if p.end >= 0 {
		r = io.NewSectionReader(f, p.begin, p.end-p.begin)
	}
	h := sha256.New()
	buf := buffers.Get().(*[]byte)
	defer buffers.Put(buf)
	n, err := io.CopyBuffer(h, r, *buf)
	if err != nil {
		return err
	}
	p.size = n
	if p.end < 0 || n == p.end-p.begin {
		p.sum = hex.EncodeToString(h.Sum(nil))
	}
	return nil
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
	bad := func(format string, args ...any) (bool, error) {
		return true, &Error{Manifest: path, Problems: []Problem{{Path: path, Reason: fmt.Sprintf(format, args...)}}}
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return bad("not a manifest: %v", err)
	}
	if m.Format != format {
		return bad("format %q, want %q", m.Format, format)
	}
	names := slices.Sorted(maps.Keys(m.Files))
	problems := make([]*Problem, len(names))
	var pieces []*piece
	for i, name := range names {
		want := m.Files[name]
		p := filepath.Join(dir, filepath.FromSlash(name))
		if !filepath.IsLocal(filepath.FromSlash(name)) {
			return bad("lists %q, a path outside its directory", name)
		}
		info, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			problems[i] = &Problem{Path: p, Reason: "missing"}
			continue
		case err != nil:
			return true, fmt.Errorf("checksum: %w", err)
		case !info.Mode().IsRegular():
			problems[i] = &Problem{Path: p, Reason: "not a regular file"}
			continue
		}
		if want.Tensors == nil {
			pieces = append(pieces, &piece{file: i, end: -1})
			continue
		}
		for n, t := range want.Tensors {
			if t.Offsets[0] < 0 || t.Offsets[1] < t.Offsets[0] {
				return bad("%s: tensor %q: offsets %v are not a byte range", name, n, t.Offsets)
			}
			pieces = append(pieces, &piece{file: i, tensor: n, begin: t.Offsets[0], end: t.Offsets[1]})
		}
		pieces = append(pieces, &piece{file: i, end: headerEnd(want.Tensors, want.Size)})
	}
	if err := hashPieces(dir, names, pieces); err != nil {
		return true, fmt.Errorf("checksum: %w", err)
	}
	// What differs, file by file.
	type diff struct {
		size    int64
		header  bool
		content string // a whole file's sum, when it differs
		tensors []string
	}
	diffs := make([]*diff, len(names))
	for _, p := range pieces {
		want := m.Files[names[p.file]]
		d := diffs[p.file]
		if d == nil {
			info, _ := os.Stat(filepath.Join(dir, filepath.FromSlash(names[p.file])))
			d = &diff{size: info.Size()}
			diffs[p.file] = d
		}
		switch {
		case p.tensor != "":
			if p.sum != want.Tensors[p.tensor].SHA256 {
				d.tensors = append(d.tensors, p.tensor)
			}
		case want.Tensors != nil:
			d.header = p.sum != want.HeaderSHA256
		default:
			if p.sum != want.SHA256 {
				d.content = p.sum
			}
		}
	}
	for i, d := range diffs {
		want := m.Files[names[i]]
		if d == nil || (d.size == want.Size && !d.header && d.content == "" && len(d.tensors) == 0) {
			continue
		}
		slices.Sort(d.tensors)
		var what []string
		if d.size != want.Size {
			what = append(what, fmt.Sprintf("%d bytes, the manifest says %d", d.size, want.Size))
		}
		if d.header {
			what = append(what, "its header differs")
		}
		if len(d.tensors) > 0 {
			what = append(what, "the bytes of "+tensorList(d.tensors)+" differ")
		}
		if d.content != "" {
			what = append(what, fmt.Sprintf("its content differs (SHA-256 %s, the manifest says %s)", short(d.content), short(want.SHA256)))
		}
		problems[i] = &Problem{Path: filepath.Join(dir, filepath.FromSlash(names[i])), Tensors: d.tensors, Reason: strings.Join(what, "; ")}
	}
	e := &Error{Manifest: path}
	for i, name := range names {
		if problems[i] != nil {
			e.Problems = append(e.Problems, *problems[i])
			continue
		}
		if !strings.HasSuffix(name, "/"+FileName) {
			continue
		}
		var sub *Error
		_, err := Verify(filepath.Join(dir, filepath.FromSlash(strings.TrimSuffix(name, "/"+FileName))))
		switch {
		case errors.As(err, &sub):
			e.Problems = append(e.Problems, sub.Problems...)
		case err != nil:
			return true, err
		}
	}
	if len(e.Problems) > 0 {
		return true, e
	}
	return true, nil
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

func short(sum string) string {
	if sum == "" {
		return "none"
	}
	return sum[:min(len(sum), 12)] + "…"
}
