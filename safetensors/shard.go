package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/hacrl/hacrl/internal/atomicfile"
)

// DefaultMaxShardSize is Hugging Face's default max_shard_size ("5GB", in
// decimal bytes): WriteSharded starts a new shard before a tensor that would
// take the current one past it.
const DefaultMaxShardSize = 5_000_000_000

// IndexSuffix ends the name of a sharded checkpoint's index:
// "model.safetensors" + IndexSuffix.
const IndexSuffix = ".index.json"

// Index is a sharded checkpoint's index (model.safetensors.index.json): the
// shard file, relative to the index's directory, of every tensor, and the
// free-form metadata, whose "total_size" is the sum of the tensors' byte
// sizes.
type Index struct {
	Metadata  map[string]any    `json:"metadata"`
	WeightMap map[string]string `json:"weight_map"`
}

// ReadIndex reads and checks an index file: a JSON object with a
// "weight_map" of tensor names to shard file names (plain names in the
// index's directory) and an optional "metadata" object. Errors name the file
// and the field or tensor at fault.
func ReadIndex(path string) (Index, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Index{}, fmt.Errorf("safetensors: %w", err)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("safetensors: %s: %w: %s", path, ErrInvalid, fmt.Sprintf(format, args...))
	}
	var raw struct {
		Metadata  json.RawMessage `json:"metadata"`
		WeightMap json.RawMessage `json:"weight_map"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return Index{}, bad("not a JSON object: %v", err)
	}
	var idx Index
	if len(raw.WeightMap) == 0 || string(raw.WeightMap) == "null" {
		return Index{}, bad(`field "weight_map" is missing`)
	}
	if err := json.Unmarshal(raw.WeightMap, &idx.WeightMap); err != nil {
		return Index{}, bad(`field "weight_map": want an object of tensor names to shard file names: %v`, err)
	}
	if len(idx.WeightMap) == 0 {
		return Index{}, bad(`field "weight_map" is empty`)
	}
	if len(raw.Metadata) > 0 && string(raw.Metadata) != "null" {
		dec := json.NewDecoder(bytes.NewReader(raw.Metadata))
		dec.UseNumber()
		if err := dec.Decode(&idx.Metadata); err != nil {
			return Index{}, bad(`field "metadata": want an object: %v`, err)
		}
	}
	for _, name := range sortedKeys(idx.WeightMap) {
		file := idx.WeightMap[name]
		if file == "" || file != filepath.Base(file) || file == "." || file == ".." || strings.ContainsAny(file, `/\`) {
			return Index{}, bad(`field "weight_map": tensor %q: shard %q is not a file name in the index's directory`, name, file)
		}
	}
	return idx, nil
}

// Files is a checkpoint spread over one or more safetensors files, read as
// one: a single file (OpenSingle) or the shards an index names (OpenIndex).
// Close it when done.
type Files struct {
	files  []*File
	byName map[string]*File
	names  []string
}

// OpenSingle opens one safetensors file as Files.
func OpenSingle(path string) (*Files, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	s := &Files{files: []*File{f}, byName: make(map[string]*File, len(f.names)), names: f.names}
	for _, name := range f.names {
		s.byName[name] = f
	}
	return s, nil
}

// OpenIndex reads the index at indexPath and opens the shards it names
// (their headers only; tensors are read on demand). It fails, naming the
// files and the tensor, when a shard is missing or malformed, when the index
// maps a tensor to a shard that does not hold it, and when a shard holds a
// tensor that the index does not map to it.
func OpenIndex(indexPath string) (*Files, error) {
	idx, err := ReadIndex(indexPath)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(indexPath)
	s := &Files{byName: make(map[string]*File, len(idx.WeightMap))}
	opened := map[string]*File{}
	for _, name := range sortedKeys(idx.WeightMap) {
		shard := idx.WeightMap[name]
		f, ok := opened[shard]
		if !ok {
			if f, err = Open(filepath.Join(dir, shard)); err != nil {
				s.Close()
				if errors.Is(err, fs.ErrNotExist) {
					return nil, fmt.Errorf("safetensors: %s: shard %s of tensor %q is missing: %w", indexPath, shard, name, err)
				}
				return nil, fmt.Errorf("safetensors: %s: shard %s: %w", indexPath, shard, err)
			}
			opened[shard] = f
			s.files = append(s.files, f)
		}
		if _, ok := f.infos[name]; !ok {
			s.Close()
			return nil, fmt.Errorf("safetensors: %s: %w: tensor %q, which %s maps to this shard, is not in it", f.path, ErrInvalid, name, indexPath)
		}
		s.byName[name] = f
		s.names = append(s.names, name)
	}
	for _, f := range s.files {
		for _, name := range f.names {
			if s.byName[name] != f {
				s.Close()
				return nil, fmt.Errorf("safetensors: %s: %w: tensor %q is not mapped to this shard by %s", f.path, ErrInvalid, name, indexPath)
			}
		}
	}
	return s, nil
}

// Names returns every tensor name, sorted. The caller must not modify it.
func (s *Files) Names() []string { return s.names }

// Lookup returns the file holding the tensor, and whether there is one.
func (s *Files) Lookup(name string) (*File, bool) {
	f, ok := s.byName[name]
	return f, ok
}

// Files returns the open files (one, or the shards in the order of their
// first tensor's name).
func (s *Files) Files() []*File { return s.files }

// Close closes every file.
func (s *Files) Close() error {
	var errs []error
	for _, f := range s.files {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}

// shardPattern matches the shard names WriteSharded gives, for a base.
func shardPattern(base string) *regexp.Regexp {
	return regexp.MustCompile(`^` + regexp.QuoteMeta(base) + `-\d{5,}-of-\d{5,}\.safetensors$`)
}

// ShardOptions are WriteSharded's choices.
type ShardOptions struct {
	// MaxShardSize is the most data bytes a shard holds before the next
	// tensor starts a new one; ≤ 0 means DefaultMaxShardSize.
	MaxShardSize int64
	// Metadata goes into every file's header; transformers wants
	// {"format": "pt"}.
	Metadata map[string]string
	// AlwaysIndex writes the index for a single file too. vLLM loads every
	// *.safetensors file of a directory unless an index names the weight
	// files, so a directory that holds other safetensors files (hacrl's
	// optimizer.safetensors) needs one.
	AlwaysIndex bool
}

// WriteSharded writes the entries into dir the way Hugging Face's
// save_pretrained does: in the given order, a new shard starts before a
// tensor that would take the current shard's data past the size limit (a
// tensor larger than the limit gets a shard of its own). One shard is
// written as base.safetensors; several as base-00001-of-0000K.safetensors, …
// with the index base.safetensors.index.json ({"metadata": {"total_size":
// N}, "weight_map": {tensor: shard}}), written after every shard. Each file
// is replaced atomically; files of an earlier save with the same base that
// the new layout does not use (the index or single file, surplus shards) are
// removed last. It returns the names of the files written, the index last.
func WriteSharded(dir, base string, entries []Entry, opts ShardOptions) ([]string, error) {
	maxShardSize, metadata := opts.MaxShardSize, opts.Metadata
	if maxShardSize <= 0 {
		maxShardSize = DefaultMaxShardSize
	}
	var shards [][]Entry
	var cur []Entry
	var curSize, total int64
	for _, e := range entries {
		size, err := byteSize(e.DType, e.Shape)
		if err != nil {
			return nil, fmt.Errorf("safetensors: write %s: tensor %q: %w: %v", dir, e.Name, ErrInvalid, err)
		}
		total += int64(size)
		if len(cur) > 0 && curSize+int64(size) > maxShardSize {
			shards = append(shards, cur)
			cur, curSize = nil, 0
		}
		cur = append(cur, e)
		curSize += int64(size)
	}
	if len(cur) > 0 || len(shards) == 0 {
		shards = append(shards, cur)
	}
	single := base + ".safetensors"
	indexName := single + IndexSuffix
	idx := Index{Metadata: map[string]any{"total_size": total}, WeightMap: map[string]string{}}
	var written []string
	for i, shard := range shards {
		name := single
		if len(shards) > 1 {
			name = fmt.Sprintf("%s-%05d-of-%05d.safetensors", base, i+1, len(shards))
		}
		if err := WriteEntries(filepath.Join(dir, name), shard, metadata); err != nil {
			return nil, err
		}
		for _, e := range shard {
			idx.WeightMap[e.Name] = name
		}
		written = append(written, name)
	}
	if len(shards) > 1 || opts.AlwaysIndex {
		data, err := json.MarshalIndent(idx, "", "  ") // sorted keys, as transformers writes it
		if err != nil {
			return nil, fmt.Errorf("safetensors: write %s: %w", indexName, err)
		}
		if err := atomicfile.WriteFile(filepath.Join(dir, indexName), append(data, '\n')); err != nil {
			return nil, fmt.Errorf("safetensors: %w", err)
		}
		written = append(written, indexName)
	}
	if err := removeStale(dir, base, written); err != nil {
		return nil, err
	}
	return written, nil
}

// removeStale deletes the checkpoint files of base in dir that are not in
// keep: the single file, the index and shards of an earlier layout.
func removeStale(dir, base string, keep []string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	single := base + ".safetensors"
	pat := shardPattern(base)
	for _, e := range ents {
		name := e.Name()
		if slices.Contains(keep, name) || !(name == single || name == single+IndexSuffix || pat.MatchString(name)) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("safetensors: remove stale %w", err)
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
