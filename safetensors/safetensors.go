// Package safetensors reads and writes the Hugging Face safetensors format, the
// file format of model checkpoints.
//
// A file is an 8-byte little-endian header length N, a JSON header of N bytes
// mapping each tensor name to its dtype, shape and data_offsets (relative to the
// first byte after the header), an optional "__metadata__" object of string
// values, and then the raw little-endian tensor data, laid out contiguously.
// Write pads the header with spaces to a multiple of 8 bytes, as the Hugging
// Face implementation does, and lays tensors out in sorted name order so that
// the same tensors always give the same bytes. Read validates the header
// completely before it reads any tensor data; every problem it finds is
// reported as an error that wraps ErrInvalid and names the file and the tensor
// or field at fault.
//
// Open reads and checks a file's header only; its tensors are then read one
// at a time (File.Tensor, or File.Float32Chunks, which streams F32, F16, BF16
// and F64 as float32 through one small buffer), so loading a checkpoint needs
// little more memory than its float32 result. WriteEntries writes tensors
// whose bytes are produced one at a time as the writer reaches them.
//
// A checkpoint too large for one file is sharded as Hugging Face does
// (WriteSharded, OpenIndex): base-00001-of-0000K.safetensors, … and the index
// base.safetensors.index.json, {"metadata": {"total_size": bytes},
// "weight_map": {tensor: shard file}}; shards are cut in the tensors' order
// before a tensor that would pass the size limit (5 GB by default, as
// transformers' max_shard_size), and a checkpoint that fits in one shard is a
// single base.safetensors, without index unless ShardOptions.AlwaysIndex.
//
// F16 converts through github.com/x448/float16 (round to nearest, ties to
// even, through subnormals; ±Inf and NaN kept); BF16 widens by a shift and
// narrows with round to nearest, ties to even, as PyTorch's
// .to(torch.bfloat16) does.
package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/hacrl/hacrl/internal/atomicfile"
)

// MaxHeaderSize is the largest JSON header Read accepts, in bytes.
const MaxHeaderSize = 100 << 20

// metadataKey is the reserved header key of the free-form string metadata.
const metadataKey = "__metadata__"

// ErrInvalid is wrapped by every error that reports a malformed file or tensor.
var ErrInvalid = errors.New("invalid safetensors data")

// Tensor is one named array of a safetensors file: its element type, its
// dimensions (empty for a scalar) and its raw little-endian bytes.
type Tensor struct {
	DType string // "F32", "F16", "BF16", "F64", "I8", "U8", "I16", "U16", "I32", "U32", "I64", "U64", "BOOL", "F8_E4M3", "F8_E5M2"
	Shape []int
	Data  []byte
}

// dtypeSizes maps each supported dtype to its element size in bytes.
var dtypeSizes = map[string]int{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1,
	"I16": 2, "U16": 2, "F16": 2, "BF16": 2,
	"I32": 4, "U32": 4, "F32": 4,
	"I64": 8, "U64": 8, "F64": 8,
}

// DTypeSize returns the size in bytes of one element of dtype, and whether the
// dtype is known.
func DTypeSize(dtype string) (int, bool) {
	n, ok := dtypeSizes[dtype]
	return n, ok
}

// NumElements returns the product of the shape's dimensions (1 for a scalar).
// It fails on a negative dimension or when the product overflows an int.
func NumElements(shape []int) (int, error) {
	n := uint64(1)
	for i, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("shape %v: dimension %d is negative", shape, i)
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > uint64(maxInt) {
			return 0, fmt.Errorf("shape %v: element count overflows", shape)
		}
		n = lo
	}
	return int(n), nil
}

const maxInt = int(^uint(0) >> 1)

// byteSize returns the number of data bytes the dtype and shape need.
func byteSize(dtype string, shape []int) (int, error) {
	size, ok := dtypeSizes[dtype]
	if !ok {
		return 0, fmt.Errorf("unknown dtype %q", dtype)
	}
	n, err := NumElements(shape)
	if err != nil {
		return 0, err
	}
	if n > maxInt/size {
		return 0, fmt.Errorf("shape %v: byte size overflows", shape)
	}
	return n * size, nil
}

// Validate checks that the dtype is known, the dimensions are not negative and
// Data holds exactly the bytes that the dtype and shape need.
func (t Tensor) Validate() error {
	want, err := byteSize(t.DType, t.Shape)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if len(t.Data) != want {
		return fmt.Errorf("%w: data has %d bytes, want %d for %s %v", ErrInvalid, len(t.Data), want, t.DType, t.Shape)
	}
	return nil
}

// tensorInfo is one tensor's entry of the JSON header.
type tensorInfo struct {
	DType       string    `json:"dtype"`
	Shape       []int     `json:"shape"`
	DataOffsets [2]uint64 `json:"data_offsets"`
}

// Write stores the tensors and the optional metadata at path. Tensor data is
// laid out in sorted name order. The file is written atomically: to a temporary
// file in the same directory, synced, then renamed over path.
func Write(path string, tensors map[string]Tensor, metadata map[string]string) error {
	entries := make([]Entry, 0, len(tensors))
	for name, t := range tensors {
		if err := t.Validate(); err != nil {
			return fmt.Errorf("safetensors: write %s: tensor %q: %w", path, name, err)
		}
		entries = append(entries, Entry{Name: name, DType: t.DType, Shape: t.Shape, Data: func() ([]byte, error) { return t.Data, nil }})
	}
	return WriteEntries(path, entries, metadata)
}

// Entry is one tensor to write with WriteEntries: its name, dtype and shape,
// and a function that returns its little-endian bytes when the writer
// reaches it, so that only one tensor's bytes need exist at a time.
type Entry struct {
	Name  string
	DType string
	Shape []int
	Data  func() ([]byte, error)
}

// WriteEntries stores the entries and the optional metadata at path, as
// Write does (sorted name order, atomic replacement), calling each entry's
// Data once, in that order. Data must return exactly the bytes the entry's
// dtype and shape need.
func WriteEntries(path string, entries []Entry, metadata map[string]string) error {
	entries = slices.Clone(entries)
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	header, err := encodeHeader(entries, metadata)
	if err != nil {
		return fmt.Errorf("safetensors: write %s: %w", path, err)
	}
	err = atomicfile.Write(path, func(w io.Writer) error {
		var prefix [8]byte
		putUint64(prefix[:], uint64(len(header)))
		if _, err := w.Write(prefix[:]); err != nil {
			return err
		}
		if _, err := w.Write(header); err != nil {
			return err
		}
		for _, e := range entries {
			data, err := e.Data()
			if err != nil {
				return fmt.Errorf("tensor %q: %w", e.Name, err)
			}
			if want, _ := byteSize(e.DType, e.Shape); len(data) != want {
				return fmt.Errorf("tensor %q: %w: data has %d bytes, want %d for %s %v", e.Name, ErrInvalid, len(data), want, e.DType, e.Shape)
			}
			if _, err := w.Write(data); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("safetensors: write %s: %w", path, err)
	}
	return nil
}

// encodeHeader checks the entries (sorted by name) and returns the
// space-padded JSON header.
func encodeHeader(entries []Entry, metadata map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	if len(metadata) > 0 {
		m, err := marshal(metadata) // encoding/json sorts map keys
		if err != nil {
			return nil, fmt.Errorf("metadata: %w", err)
		}
		buf.WriteString(`"` + metadataKey + `":`)
		buf.Write(m)
	}
	var offset uint64
	for i, e := range entries {
		if e.Name == metadataKey {
			return nil, fmt.Errorf("%w: tensor name %q is reserved for metadata", ErrInvalid, e.Name)
		}
		if i > 0 && entries[i-1].Name == e.Name {
			return nil, fmt.Errorf("%w: duplicate tensor %q", ErrInvalid, e.Name)
		}
		size, err := byteSize(e.DType, e.Shape)
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %w: %v", e.Name, ErrInvalid, err)
		}
		shape := e.Shape
		if shape == nil {
			shape = []int{} // a scalar's shape is [], never null
		}
		end := offset + uint64(size)
		entry, err := marshal(tensorInfo{DType: e.DType, Shape: shape, DataOffsets: [2]uint64{offset, end}})
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %w", e.Name, err)
		}
		if i > 0 || len(metadata) > 0 {
			buf.WriteByte(',')
		}
		key, _ := marshal(e.Name)
		buf.Write(key)
		buf.WriteByte(':')
		buf.Write(entry)
		offset = end
	}
	buf.WriteByte('}')
	for buf.Len()%8 != 0 {
		buf.WriteByte(' ')
	}
	if buf.Len() > MaxHeaderSize {
		return nil, fmt.Errorf("%w: header of %d bytes exceeds the %d-byte limit", ErrInvalid, buf.Len(), MaxHeaderSize)
	}
	return buf.Bytes(), nil
}

// marshal encodes v as compact JSON without HTML escaping.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Read loads every tensor and the metadata of the file at path. The metadata
// map is empty, not nil, when the file has none. Each tensor gets its own Data
// slice. To read a large file tensor by tensor, use Open.
func Read(path string) (map[string]Tensor, map[string]string, error) {
	f, err := Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	tensors := make(map[string]Tensor, len(f.names))
	for _, name := range f.names {
		t, err := f.Tensor(name)
		if err != nil {
			return nil, nil, err
		}
		tensors[name] = t
	}
	return tensors, f.metadata, nil
}

type reader struct {
	f    io.ReaderAt
	path string
	size int64
}

// errorf returns an ErrInvalid error naming the file.
func (r *reader) errorf(format string, args ...any) error {
	return fmt.Errorf("safetensors: %s: %w: %s", r.path, ErrInvalid, fmt.Sprintf(format, args...))
}

// header reads and validates the header: the tensors' entries, their sorted
// names, the metadata and the offset of the data section in the file.
func (r *reader) header() (map[string]tensorInfo, []string, map[string]string, int64, error) {
	if r.size < 8 {
		return nil, nil, nil, 0, r.errorf("truncated file: %d bytes, want at least the 8-byte header length", r.size)
	}
	var prefix [8]byte
	if _, err := r.f.ReadAt(prefix[:], 0); err != nil {
		return nil, nil, nil, 0, fmt.Errorf("safetensors: %s: %w", r.path, err)
	}
	n := getUint64(prefix[:])
	if n > MaxHeaderSize {
		return nil, nil, nil, 0, r.errorf("header length %d exceeds the %d-byte limit", n, MaxHeaderSize)
	}
	if n > uint64(r.size-8) {
		return nil, nil, nil, 0, r.errorf("header length %d goes beyond the end of the %d-byte file", n, r.size)
	}
	header := make([]byte, n)
	if _, err := r.f.ReadAt(header, 8); err != nil {
		return nil, nil, nil, 0, fmt.Errorf("safetensors: %s: %w", r.path, err)
	}
	dataStart := 8 + int64(n)
	infos, names, metadata, err := r.parseHeader(header)
	if err != nil {
		return nil, nil, nil, 0, err
	}
	if err := r.checkLayout(infos, names, uint64(r.size-dataStart)); err != nil {
		return nil, nil, nil, 0, err
	}
	return infos, names, metadata, dataStart, nil
}

// parseHeader decodes the JSON header, rejecting duplicate names, missing
// fields, unknown dtypes and negative dimensions.
func (r *reader) parseHeader(header []byte) (map[string]tensorInfo, []string, map[string]string, error) {
	dec := json.NewDecoder(bytes.NewReader(header))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, nil, r.errorf("header is not a JSON object: %s", describeJSONError(err, tok))
	}
	infos := make(map[string]tensorInfo)
	var names []string
	metadata := make(map[string]string)
	seenMetadata := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, nil, r.errorf("bad header JSON: %v", err)
		}
		name := tok.(string) // object keys are always strings
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, nil, r.errorf("bad header JSON at %q: %v", name, err)
		}
		if name == metadataKey {
			if seenMetadata {
				return nil, nil, nil, r.errorf("duplicate %q", metadataKey)
			}
			seenMetadata = true
			if err := decodeMetadata(raw, metadata); err != nil {
				return nil, nil, nil, r.errorf("%s: %v", metadataKey, err)
			}
			continue
		}
		if _, dup := infos[name]; dup {
			return nil, nil, nil, r.errorf("duplicate tensor %q", name)
		}
		info, err := decodeInfo(raw)
		if err != nil {
			return nil, nil, nil, r.errorf("tensor %q: %v", name, err)
		}
		infos[name] = info
		names = append(names, name)
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, nil, nil, r.errorf("bad header JSON: %v", err)
	}
	if rest := bytes.TrimLeft(header[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return nil, nil, nil, r.errorf("header has %d unexpected bytes after the JSON object", len(rest))
	}
	slices.Sort(names)
	return infos, names, metadata, nil
}

func describeJSONError(err error, tok json.Token) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("starts with %v", tok)
}

func decodeMetadata(raw json.RawMessage, into map[string]string) error {
	if string(raw) == "null" {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("want an object of strings: %v", err)
	}
	for k, v := range m {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return fmt.Errorf("key %q: want a string value, got %s", k, v)
		}
		into[k] = s
	}
	return nil
}

// decodeInfo decodes one tensor entry, requiring all three fields.
func decodeInfo(raw json.RawMessage) (tensorInfo, error) {
	var fields struct {
		DType       *string        `json:"dtype"`
		Shape       []json.Number  `json:"shape"`
		DataOffsets *[]json.Number `json:"data_offsets"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fields); err != nil {
		return tensorInfo{}, fmt.Errorf("want {dtype, shape, data_offsets}: %v", err)
	}
	switch {
	case fields.DType == nil:
		return tensorInfo{}, errors.New("missing field dtype")
	case fields.Shape == nil:
		return tensorInfo{}, errors.New("missing field shape")
	case fields.DataOffsets == nil:
		return tensorInfo{}, errors.New("missing field data_offsets")
	}
	info := tensorInfo{DType: *fields.DType, Shape: make([]int, len(fields.Shape))}
	if _, ok := dtypeSizes[info.DType]; !ok {
		return tensorInfo{}, fmt.Errorf("unknown dtype %q", info.DType)
	}
	for i, d := range fields.Shape {
		v, err := strconv.ParseInt(string(d), 10, 64)
		if err != nil || v > int64(maxInt) {
			return tensorInfo{}, fmt.Errorf("shape[%d] = %s: want an integer", i, d)
		}
		if v < 0 {
			return tensorInfo{}, fmt.Errorf("shape[%d] = %d: dimension is negative", i, v)
		}
		info.Shape[i] = int(v)
	}
	if len(*fields.DataOffsets) != 2 {
		return tensorInfo{}, fmt.Errorf("data_offsets has %d values, want [begin, end]", len(*fields.DataOffsets))
	}
	for i, o := range *fields.DataOffsets {
		v, err := strconv.ParseUint(string(o), 10, 64)
		if err != nil {
			return tensorInfo{}, fmt.Errorf("data_offsets[%d] = %s: want a non-negative integer", i, o)
		}
		info.DataOffsets[i] = v
	}
	return info, nil
}

// checkLayout verifies that each tensor's data_offsets match its dtype and
// shape and that the tensors tile the data section exactly: no gap, no
// overlap, nothing out of range.
func (r *reader) checkLayout(infos map[string]tensorInfo, names []string, dataLen uint64) error {
	for _, name := range names {
		info := infos[name]
		begin, end := info.DataOffsets[0], info.DataOffsets[1]
		if begin > end {
			return r.errorf("tensor %q: data_offsets [%d, %d] end before they begin", name, begin, end)
		}
		if end > dataLen {
			return r.errorf("tensor %q: data_offsets [%d, %d] out of range: the data section has %d bytes", name, begin, end, dataLen)
		}
		want, err := byteSize(info.DType, info.Shape)
		if err != nil {
			return r.errorf("tensor %q: %v", name, err)
		}
		if end-begin != uint64(want) {
			return r.errorf("tensor %q: data_offsets [%d, %d] span %d bytes, want %d for %s %v", name, begin, end, end-begin, want, info.DType, info.Shape)
		}
	}
	byOffset := slices.Clone(names)
	slices.SortStableFunc(byOffset, func(a, b string) int {
		ia, ib := infos[a].DataOffsets, infos[b].DataOffsets
		if ia[0] != ib[0] {
			return cmpUint64(ia[0], ib[0])
		}
		return cmpUint64(ia[1], ib[1])
	})
	var pos uint64
	prev := ""
	for _, name := range byOffset {
		begin, end := infos[name].DataOffsets[0], infos[name].DataOffsets[1]
		switch {
		case begin < pos:
			return r.errorf("tensor %q: data_offsets [%d, %d] overlap tensor %q, which ends at %d", name, begin, end, prev, pos)
		case begin > pos:
			return r.errorf("tensor %q: data_offsets [%d, %d] leave a gap: the previous tensor ends at %d", name, begin, end, pos)
		}
		pos, prev = end, name
	}
	if pos != dataLen {
		return r.errorf("the data section has %d bytes but the tensors cover %d", dataLen, pos)
	}
	return nil
}

func cmpUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
