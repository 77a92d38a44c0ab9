package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/x448/float16"
)

func putUint64(b []byte, v uint64) { binary.LittleEndian.PutUint64(b, v) }
func getUint64(b []byte) uint64    { return binary.LittleEndian.Uint64(b) }

// FromFloat32 returns an F32 tensor holding data with the given shape. It does
// not check that len(data) matches the shape; Validate and Write do.
func FromFloat32(shape []int, data []float32) Tensor {
	b := make([]byte, 4*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return Tensor{DType: "F32", Shape: shape, Data: b}
}

// FromFloat32As returns a tensor of dtype "F32", "F16", "BF16" or "F64" holding
// data with the given shape. Narrowing to F16 and BF16 rounds to nearest, ties
// to even, as PyTorch does; values beyond the F16 range become ±Inf.
func FromFloat32As(dtype string, shape []int, data []float32) (Tensor, error) {
	switch dtype {
	case "F32":
		return FromFloat32(shape, data), nil
	case "F64":
		b := make([]byte, 8*len(data))
		for i, v := range data {
			binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(float64(v)))
		}
		return Tensor{DType: dtype, Shape: shape, Data: b}, nil
	case "F16", "BF16":
		conv := Float32ToFloat16
		if dtype == "BF16" {
			conv = Float32ToBFloat16
		}
		b := make([]byte, 2*len(data))
		for i, v := range data {
			binary.LittleEndian.PutUint16(b[2*i:], conv(v))
		}
		return Tensor{DType: dtype, Shape: shape, Data: b}, nil
	}
	return Tensor{}, fmt.Errorf("safetensors: cannot store float32 values as dtype %q, want F32, F16, BF16 or F64", dtype)
}

// Float32s decodes an F32, F16 or BF16 tensor to float32 values. The F16 and
// BF16 conversions are exact.
func (t Tensor) Float32s() ([]float32, error) {
	size := dtypeSizes[t.DType]
	if t.DType != "F32" && t.DType != "F16" && t.DType != "BF16" {
		return nil, fmt.Errorf("safetensors: cannot decode dtype %q as float32, want F32, F16 or BF16", t.DType)
	}
	if len(t.Data)%size != 0 {
		return nil, fmt.Errorf("%w: %s data of %d bytes is not a whole number of elements", ErrInvalid, t.DType, len(t.Data))
	}
	out := make([]float32, len(t.Data)/size)
	switch t.DType {
	case "F32":
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
		}
	case "F16":
		for i := range out {
			out[i] = Float16ToFloat32(binary.LittleEndian.Uint16(t.Data[2*i:]))
		}
	case "BF16":
		for i := range out {
			out[i] = BFloat16ToFloat32(binary.LittleEndian.Uint16(t.Data[2*i:]))
		}
	}
	return out, nil
}

// FromFloat64 returns an F64 tensor holding data with the given shape.
func FromFloat64(shape []int, data []float64) Tensor {
	b := make([]byte, 8*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
	}
	return Tensor{DType: "F64", Shape: shape, Data: b}
}

// Float64s decodes an F64, F32, F16 or BF16 tensor to float64 values; every
// conversion is exact.
func (t Tensor) Float64s() ([]float64, error) {
	switch t.DType {
	case "F32", "F16", "BF16":
		f32, err := t.Float32s()
		if err != nil {
			return nil, err
		}
		out := make([]float64, len(f32))
		for i, v := range f32 {
			out[i] = float64(v)
		}
		return out, nil
	case "F64":
	default:
		return nil, fmt.Errorf("safetensors: cannot decode dtype %q as float64, want F64, F32, F16 or BF16", t.DType)
	}
	if len(t.Data)%8 != 0 {
		return nil, fmt.Errorf("%w: F64 data of %d bytes is not a whole number of elements", ErrInvalid, len(t.Data))
	}
	out := make([]float64, len(t.Data)/8)
	for i := range out {
		out[i] = math.Float64frombits(binary.LittleEndian.Uint64(t.Data[8*i:]))
	}
	return out, nil
}

// FromInt64 returns an I64 tensor holding data with the given shape.
func FromInt64(shape []int, data []int64) Tensor {
	b := make([]byte, 8*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
	}
	return Tensor{DType: "I64", Shape: shape, Data: b}
}

// Int64s decodes an integer or BOOL tensor (I8, U8, I16, U16, I32, U32, I64,
// U64, BOOL) to int64 values. A U64 value above math.MaxInt64 is an error.
func (t Tensor) Int64s() ([]int64, error) {
	size, ok := dtypeSizes[t.DType]
	if !ok {
		return nil, fmt.Errorf("safetensors: cannot decode unknown dtype %q as int64", t.DType)
	}
	if len(t.Data)%size != 0 {
		return nil, fmt.Errorf("%w: %s data of %d bytes is not a whole number of elements", ErrInvalid, t.DType, len(t.Data))
	}
	out := make([]int64, len(t.Data)/size)
	d := t.Data
	le := binary.LittleEndian
	switch t.DType {
	case "I8":
		for i := range out {
			out[i] = int64(int8(d[i]))
		}
	case "U8", "BOOL":
		for i := range out {
			out[i] = int64(d[i])
		}
	case "I16":
		for i := range out {
			out[i] = int64(int16(le.Uint16(d[2*i:])))
		}
	case "U16":
		for i := range out {
			out[i] = int64(le.Uint16(d[2*i:]))
		}
	case "I32":
		for i := range out {
			out[i] = int64(int32(le.Uint32(d[4*i:])))
		}
	case "U32":
		for i := range out {
			out[i] = int64(le.Uint32(d[4*i:]))
		}
	case "I64":
		for i := range out {
			out[i] = int64(le.Uint64(d[8*i:]))
		}
	case "U64":
		for i := range out {
			v := le.Uint64(d[8*i:])
			if v > math.MaxInt64 {
				return nil, fmt.Errorf("safetensors: U64 element %d = %d does not fit in int64", i, v)
			}
			out[i] = int64(v)
		}
	default:
		return nil, fmt.Errorf("safetensors: cannot decode dtype %q as int64, want an integer or BOOL dtype", t.DType)
	}
	return out, nil
}

// Float16ToFloat32 converts IEEE 754 half-precision bits to float32 exactly,
// including subnormals and infinities; a NaN stays a NaN (made quiet). It is
// github.com/x448/float16's conversion, checked by its author on all 65536
// inputs and here against the format's definition.
func Float16ToFloat32(h uint16) float32 { return float16.Frombits(h).Float32() }

// Float32ToFloat16 converts a float32 to IEEE 754 half-precision bits,
// rounding to nearest with ties to even (as PyTorch's .to(torch.float16)
// does), through subnormals; overflow gives ±Inf and NaN stays NaN. It is
// github.com/x448/float16's conversion, checked by its author on all 2³²
// inputs and here against the nearest half by value.
func Float32ToFloat16(f float32) uint16 { return float16.Fromfloat32(f).Bits() }

// BFloat16ToFloat32 converts bfloat16 bits to float32 exactly: bfloat16 is
// the top half of a float32. The two bfloat16 conversions are written out
// here, not taken from a library: they are a shift and a three-line
// round-to-nearest-even (PyTorch's c10::BFloat16), the conversions of
// gomlx's bfloat16 package (already a dependency) turn a NaN whose payload
// lies in the low 16 bits into an infinity, and the tests check both
// against all 65536 bfloat16 values and the tie cases.
func BFloat16ToFloat32(h uint16) float32 {
	return math.Float32frombits(uint32(h) << 16)
}

// Float32ToBFloat16 converts a float32 to bfloat16 bits, rounding to nearest
// with ties to even; NaN stays NaN.
func Float32ToBFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 { // NaN: truncate and force a quiet bit
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}
