package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"
)

// chunkBytes is the most bytes of tensor data File.Float32Chunks reads at a
// time: its buffers, reused from one tensor to the next so that a load
// leaves no garbage behind, are the only memory a streamed read needs,
// whatever the tensor's size.
const chunkBytes = 1 << 20

// chunk is Float32Chunks's pair of buffers: the raw bytes of chunkBytes/8
// elements of up to 8 bytes, and their float32 values.
type chunk struct {
	raw []byte
	out []float32
}

var chunkPool = sync.Pool{New: func() any {
	return &chunk{raw: make([]byte, chunkBytes), out: make([]float32, chunkBytes/8)}
}}

// File is an open safetensors file whose header has been read and fully
// validated (as Read does). Tensors are read one at a time, on demand, with
// ReadAt at the offsets the header gives, so a caller never holds more of
// the file in memory than the tensor it is converting. A File is safe for
// concurrent reads; Close it when done.
type File struct {
	f         *os.File
	path      string
	dataStart int64
	infos     map[string]tensorInfo
	names     []string
	metadata  map[string]string
}

// Open opens the safetensors file at path and validates its header. Errors
// wrap ErrInvalid for a malformed file and name the file and the tensor or
// field at fault.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	r := reader{f: f, path: path, size: st.Size()}
	infos, names, metadata, dataStart, err := r.header()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &File{f: f, path: path, dataStart: dataStart, infos: infos, names: names, metadata: metadata}, nil
}

// Close closes the file.
func (f *File) Close() error { return f.f.Close() }

// Path returns the path the file was opened with.
func (f *File) Path() string { return f.path }

// Names returns the tensor names in sorted order. The caller must not modify
// the slice.
func (f *File) Names() []string { return f.names }

// Metadata returns the header's "__metadata__" strings (empty, not nil, when
// there are none).
func (f *File) Metadata() map[string]string { return f.metadata }

// Info returns a tensor's dtype and shape, and whether the file has it.
func (f *File) Info(name string) (dtype string, shape []int, ok bool) {
	info, ok := f.infos[name]
	if !ok {
		return "", nil, false
	}
	return info.DType, slices.Clone(info.Shape), true
}

// Range returns the byte range [begin, end) of a tensor's data in the file
// (offsets from the file's first byte), and whether the file has it.
func (f *File) Range(name string) (begin, end int64, ok bool) {
	info, ok := f.infos[name]
	if !ok {
		return 0, 0, false
	}
	return f.dataStart + int64(info.DataOffsets[0]), f.dataStart + int64(info.DataOffsets[1]), true
}

// Tensor reads one tensor's raw bytes.
func (f *File) Tensor(name string) (Tensor, error) {
	info, ok := f.infos[name]
	if !ok {
		return Tensor{}, fmt.Errorf("safetensors: %s: tensor %q is not in the file", f.path, name)
	}
	data := make([]byte, info.DataOffsets[1]-info.DataOffsets[0])
	if _, err := f.f.ReadAt(data, f.dataStart+int64(info.DataOffsets[0])); err != nil {
		return Tensor{}, fmt.Errorf("safetensors: %s: tensor %q: %w", f.path, name, err)
	}
	return Tensor{DType: info.DType, Shape: slices.Clone(info.Shape), Data: data}, nil
}

// Float32Chunks streams an F32, F16, BF16 or F64 tensor as float32 values in
// row-major order: fn receives consecutive chunks, each with the index of its
// first element, and may not keep the chunk after it returns (the buffer is
// reused). F16 and BF16 widen exactly; F64 rounds to nearest (a value beyond
// the float32 range becomes infinite). It reads through buffers of about
// 1.5 MiB in all, whatever the tensor's size, reused from call to call. An
// error from fn stops the read and is returned as is.
func (f *File) Float32Chunks(name string, fn func(first int, chunk []float32) error) error {
	info, ok := f.infos[name]
	if !ok {
		return fmt.Errorf("safetensors: %s: tensor %q is not in the file", f.path, name)
	}
	size := dtypeSizes[info.DType]
	switch info.DType {
	case "F32", "F16", "BF16", "F64":
	default:
		return fmt.Errorf("safetensors: %s: tensor %q: dtype %s cannot be read as float32, want F32, F16, BF16 or F64", f.path, name, info.DType)
	}
	begin, end := int64(info.DataOffsets[0]), int64(info.DataOffsets[1])
	total := int((end - begin) / int64(size))
	per := chunkBytes / 8 // elements per chunk, for every dtype
	buf := chunkPool.Get().(*chunk)
	defer chunkPool.Put(buf)
	for first := 0; first < total; first += per {
		n := min(per, total-first)
		b, out := buf.raw[:n*size], buf.out[:n]
		if _, err := f.f.ReadAt(b, f.dataStart+begin+int64(first*size)); err != nil {
			return fmt.Errorf("safetensors: %s: tensor %q: %w", f.path, name, err)
		}
		decodeFloat32s(info.DType, b, out)
		if err := fn(first, out); err != nil {
			return err
		}
	}
	return nil
}

// decodeFloat32s converts the little-endian elements of b, of a float dtype,
// into out (len(out) elements).
func decodeFloat32s(dtype string, b []byte, out []float32) {
	le := binary.LittleEndian
	switch dtype {
	case "F32":
		for i := range out {
			out[i] = math.Float32frombits(le.Uint32(b[4*i:]))
		}
	case "F16":
		for i := range out {
			out[i] = Float16ToFloat32(le.Uint16(b[2*i:]))
		}
	case "BF16":
		for i := range out {
			out[i] = BFloat16ToFloat32(le.Uint16(b[2*i:]))
		}
	case "F64":
		for i := range out {
			out[i] = float32(math.Float64frombits(le.Uint64(b[8*i:])))
		}
	}
}
