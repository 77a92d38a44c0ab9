package safetensors

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// halfValue decodes half-precision bits by the IEEE 754 definition, as an
// independent reference for Float16ToFloat32.
func halfValue(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp, mant := int(h>>10)&0x1f, float64(h&0x3ff)
	switch exp {
	case 0x1f:
		if mant != 0 {
			return math.NaN()
		}
		return math.Inf(int(sign))
	case 0:
		return sign * mant * math.Pow(2, -24)
	}
	return sign * (1024 + mant) * math.Pow(2, float64(exp-25))
}

func TestFloat16AllValues(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		f := Float16ToFloat32(h)
		want := halfValue(h)
		if math.IsNaN(want) {
			if !math.IsNaN(float64(f)) {
				t.Fatalf("Float16ToFloat32(%#04x) = %v, want NaN", h, f)
			}
			if back := Float32ToFloat16(f); back&0x7c00 != 0x7c00 || back&0x3ff == 0 {
				t.Fatalf("Float32ToFloat16(NaN from %#04x) = %#04x, want a NaN", h, back)
			}
			continue
		}
		if float64(f) != want || math.Signbit(float64(f)) != (h&0x8000 != 0) {
			t.Fatalf("Float16ToFloat32(%#04x) = %v, want %v", h, f, want)
		}
		if back := Float32ToFloat16(f); back != h {
			t.Fatalf("Float32ToFloat16(%v) = %#04x, want %#04x", f, back, h)
		}
	}
}

func TestFloat32ToFloat16Rounding(t *testing.T) {
	tests := []struct {
		in   float32
		want uint16
	}{
		{1 + 1.0/2048, 0x3c00},        // tie between 1 and its odd successor: to even
		{1 + 3.0/2048, 0x3c02},        // tie between odd and even: up to even
		{1 + 1.0/2048 + 1e-7, 0x3c01}, // just above the tie: up
		{65504, 0x7bff},               // largest finite
		{65519, 0x7bff},               // below the tie with 65536
		{65520, 0x7c00},               // the tie rounds to even, which is Inf
		{1e10, 0x7c00},
		{-1e10, 0xfc00},
		{float32(math.Ldexp(1, -24)), 0x0001},      // smallest subnormal
		{float32(math.Ldexp(1, -25)), 0x0000},      // half of it: tie to even zero
		{float32(math.Ldexp(1.5, -25)), 0x0001},    // above the tie
		{float32(math.Ldexp(3, -25)), 0x0002},      // tie between 1 and 2 subnormal ulps: to even
		{float32(math.Ldexp(1023.5, -24)), 0x0400}, // rounds up into the smallest normal
		{float32(math.Copysign(0, -1)), 0x8000},
		{1e-30, 0x0000},
	}
	for _, tc := range tests {
		if got := Float32ToFloat16(tc.in); got != tc.want {
			t.Errorf("Float32ToFloat16(%g) = %#04x, want %#04x", tc.in, got, tc.want)
		}
	}
}

// TestFloat32ToFloat16Nearest checks on random values that the result is the
// nearest half (ties to even) by comparing it with its neighbors.
func TestFloat32ToFloat16Nearest(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200000 {
		f := float32(math.Ldexp(rng.Float64()*2-1, rng.IntN(42)-26))
		h := Float32ToFloat16(f)
		d := math.Abs(float64(f) - halfValue(h))
		for _, n := range []uint16{h - 1, h + 1} {
			if n&0x7fff >= 0x7c00 || n>>15 != h>>15 {
				continue
			}
			dn := math.Abs(float64(f) - halfValue(n))
			if dn < d || (dn == d && h&1 == 1) {
				t.Fatalf("Float32ToFloat16(%g) = %#04x (%g), but %#04x (%g) is nearer or even", f, h, halfValue(h), n, halfValue(n))
			}
		}
	}
}

func TestBFloat16(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		f := BFloat16ToFloat32(h)
		if math.Float32bits(f) != uint32(h)<<16 {
			t.Fatalf("BFloat16ToFloat32(%#04x) bits = %#08x", h, math.Float32bits(f))
		}
		back := Float32ToBFloat16(f)
		if math.IsNaN(float64(f)) {
			if !math.IsNaN(float64(BFloat16ToFloat32(back))) {
				t.Fatalf("Float32ToBFloat16(NaN %#04x) = %#04x, not NaN", h, back)
			}
		} else if back != h {
			t.Fatalf("Float32ToBFloat16(%v) = %#04x, want %#04x", f, back, h)
		}
	}
	tests := []struct {
		in   float32
		want uint16
	}{
		{1 + 1.0/256, 0x3f80},            // tie to even: down
		{1 + 3.0/256, 0x3f82},            // tie to even: up
		{1 + 1.0/256 + 1.0/4096, 0x3f81}, // above the tie
		{math.MaxFloat32, 0x7f80},        // rounds up to Inf
		{-2.5, 0xc020},
	}
	for _, tc := range tests {
		if got := Float32ToBFloat16(tc.in); got != tc.want {
			t.Errorf("Float32ToBFloat16(%g) = %#04x, want %#04x", tc.in, got, tc.want)
		}
	}
}

func TestFloatConversions(t *testing.T) {
	vals := []float32{0, 1, -2.5, 0.375, 1024, -0.0009765625}
	for _, dtype := range []string{"F32", "F16", "BF16", "F64"} {
		tensor, err := FromFloat32As(dtype, []int{2, 3}, vals)
		if err != nil {
			t.Fatal(err)
		}
		if err := tensor.Validate(); err != nil || tensor.DType != dtype {
			t.Fatalf("%s: Validate = %v, dtype %s", dtype, err, tensor.DType)
		}
		f64, err := tensor.Float64s()
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range vals { // every value is exact in all four dtypes
			if f64[i] != float64(v) {
				t.Errorf("%s: Float64s()[%d] = %v, want %v", dtype, i, f64[i], v)
			}
		}
		if dtype != "F64" {
			f32, err := tensor.Float32s()
			if err != nil || !slices.Equal(f32, vals) {
				t.Errorf("%s: Float32s = %v (%v), want %v", dtype, f32, err, vals)
			}
		}
	}
	f64 := []float64{math.Pi, -1e300, math.Inf(1)}
	if got, err := FromFloat64([]int{3}, f64).Float64s(); err != nil || !slices.Equal(got, f64) {
		t.Errorf("FromFloat64 round trip = %v (%v), want %v", got, err, f64)
	}
	if _, err := FromFloat32As("I32", []int{1}, []float32{1}); err == nil || !strings.Contains(err.Error(), `dtype "I32"`) {
		t.Errorf("FromFloat32As(I32) error = %v, want one naming the dtype", err)
	}
	for _, dtype := range []string{"F64", "I32", "U8", "bogus"} {
		if _, err := (Tensor{DType: dtype, Data: make([]byte, 8)}).Float32s(); err == nil || !strings.Contains(err.Error(), dtype) {
			t.Errorf("Float32s on %s: error = %v, want one naming the dtype", dtype, err)
		}
	}
	if _, err := (Tensor{DType: "I64", Data: make([]byte, 8)}).Float64s(); err == nil {
		t.Error("Float64s on I64 succeeded, want an error")
	}
	if _, err := (Tensor{DType: "F32", Data: make([]byte, 6)}).Float32s(); err == nil {
		t.Error("Float32s on 6 bytes of F32 succeeded, want an error")
	}
}

func TestInt64s(t *testing.T) {
	tests := []struct {
		dtype string
		data  []byte
		want  []int64
	}{
		{"I8", []byte{0xff, 0x7f}, []int64{-1, 127}},
		{"U8", []byte{0xff, 0x00}, []int64{255, 0}},
		{"BOOL", []byte{1, 0}, []int64{1, 0}},
		{"I16", []byte{0xff, 0xff, 0x00, 0x80}, []int64{-1, -32768}},
		{"U16", []byte{0xff, 0xff, 0x34, 0x12}, []int64{65535, 0x1234}},
		{"I32", []byte{0xfe, 0xff, 0xff, 0xff}, []int64{-2}},
		{"U32", []byte{0xff, 0xff, 0xff, 0xff}, []int64{4294967295}},
		{"I64", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x80}, []int64{math.MinInt64 + 0xffffffffffffff}},
		{"U64", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, []int64{math.MaxInt64}},
	}
	for _, tc := range tests {
		got, err := Tensor{DType: tc.dtype, Data: tc.data}.Int64s()
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s Int64s = %v (%v), want %v", tc.dtype, got, err, tc.want)
		}
	}
	ids := []int64{0, -5, math.MaxInt64, math.MinInt64}
	if got, err := FromInt64([]int{4}, ids).Int64s(); err != nil || !slices.Equal(got, ids) {
		t.Errorf("FromInt64 round trip = %v (%v), want %v", got, err, ids)
	}
	if _, err := (Tensor{DType: "U64", Data: []byte{0, 0, 0, 0, 0, 0, 0, 0x80}}).Int64s(); err == nil || !strings.Contains(err.Error(), "does not fit") {
		t.Errorf("U64 overflow error = %v, want 'does not fit'", err)
	}
	if _, err := (Tensor{DType: "F32", Data: make([]byte, 4)}).Int64s(); err == nil || !strings.Contains(err.Error(), `"F32"`) {
		t.Errorf("F32 Int64s error = %v, want one naming the dtype", err)
	}
}

func TestNumElements(t *testing.T) {
	tests := []struct {
		shape []int
		want  int
		err   string
	}{
		{nil, 1, ""},
		{[]int{2, 3, 4}, 24, ""},
		{[]int{0, 7}, 0, ""},
		{[]int{3, -1}, 0, "dimension 1 is negative"},
		{[]int{1 << 40, 1 << 40}, 0, "overflows"},
	}
	for _, tc := range tests {
		got, err := NumElements(tc.shape)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("NumElements(%v) error = %v, want %q", tc.shape, err, tc.err)
			}
		} else if err != nil || got != tc.want {
			t.Errorf("NumElements(%v) = %d (%v), want %d", tc.shape, got, err, tc.want)
		}
	}
}

// TestRoundingBoundaries checks every rounding boundary of both narrowings:
// for each pair of adjacent finite values a < b of the narrow format, their
// midpoint (exact in float32) must go to the one with an even significand,
// and the float32 values just below and above it to a and b. Negative
// values mirror positive ones.
func TestRoundingBoundaries(t *testing.T) {
	tests := []struct {
		name   string
		maxPos uint16 // bits of the largest finite positive value
		widen  func(uint16) float32
		narrow func(float32) uint16
	}{
		{"F16", 0x7bff, Float16ToFloat32, Float32ToFloat16},
		{"BF16", 0x7f7f, BFloat16ToFloat32, Float32ToBFloat16},
	}
	for _, tc := range tests {
		for a := uint16(0); a < tc.maxPos; a++ {
			b := a + 1
			lo, hi := float64(tc.widen(a)), float64(tc.widen(b))
			mid := float32((lo + hi) / 2)
			if float64(mid) != (lo+hi)/2 {
				t.Fatalf("%s: midpoint of %#04x and %#04x is not exact in float32", tc.name, a, b)
			}
			even := a
			if a&1 == 1 {
				even = b
			}
			below := math.Nextafter32(mid, float32(math.Inf(-1)))
			above := math.Nextafter32(mid, float32(math.Inf(1)))
			for _, c := range []struct {
				in   float32
				want uint16
			}{{mid, even}, {below, a}, {above, b}, {-mid, even | 0x8000}, {-below, a | 0x8000}, {-above, b | 0x8000}} {
				if got := tc.narrow(c.in); got != c.want {
					t.Fatalf("%s: narrow(%g) = %#04x, want %#04x (between %#04x and %#04x)", tc.name, c.in, got, c.want, a, b)
				}
			}
		}
	}
}
