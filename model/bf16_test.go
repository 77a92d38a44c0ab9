package model

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
)

func TestSetComputeDType(t *testing.T) {
	m := newTiny(t, "llama-gqa", 1)
	if err := m.SetComputeDType(dtypes.Float16); err == nil {
		t.Error("float16 accepted")
	}
	m.SetEngine(EngineNative)
	if err := m.SetComputeDType(dtypes.BFloat16); err == nil {
		t.Error("bfloat16 on the native engine accepted")
	}
	m.SetEngine(EngineAuto)
	if err := m.SetComputeDType(dtypes.BFloat16); err == nil || !strings.Contains(err.Error(), "XLA backend") {
		t.Errorf("bfloat16 on the Go backend: error %v, want a refusal pointing to the XLA backend", err)
	}
	if m.ComputeDType() != dtypes.Float32 {
		t.Errorf("after refusals the model computes in %s, want float32", m.ComputeDType())
	}
	m64, err := newModel(testBackend(t), tinyConfigs["llama-gqa"], 1, dtypes.Float64)
	if err != nil {
		t.Fatal(err)
	}
	if err := m64.SetComputeDType(dtypes.BFloat16); err == nil {
		t.Error("bfloat16 on a float64 model accepted")
	}
}

// GoMLX's Go backend (compute v0.1.3) computes a bfloat16 x·Wᵀ — both
// contracted axes last, the layout of q·kᵀ and of Linear weights — with
// errors of the order of the result itself, while x·W is within bfloat16's
// rounding: the reason SetComputeDType refuses bfloat16 there. When this
// test fails, GoMLX has fixed it, and the refusal can go.
func TestGoBackendBF16Products(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([][]float32, 8)
	for i := range x {
		x[i] = make([]float32, 16)
		for j := range x[i] {
			x[i][j] = float32(rng.NormFloat64())
		}
	}
	b := testBackend(t)
	worst := func(f func(a *graph.Node) *graph.Node) float64 {
		r32 := graph.MustExecOnce(b, f, x)
		r16 := graph.MustExecOnce(b, func(a *graph.Node) *graph.Node {
			return graph.ConvertDType(f(graph.ConvertDType(a, dtypes.BFloat16)), dtypes.Float32)
		}, x)
		v32, v16 := tensors.MustCopyFlatData[float32](r32), tensors.MustCopyFlatData[float32](r16)
		w := 0.0
		for i := range v32 {
			w = math.Max(w, math.Abs(float64(v32[i]-v16[i]))/(1+math.Abs(float64(v32[i]))))
		}
		return w
	}
	// The same product x·xᵀ, with xᵀ laid out as W [16,8] and as Wᵀ [8,16].
	xw := worst(func(a *graph.Node) *graph.Node {
		return graph.DotGeneral(a, []int{1}, nil, graph.Transpose(a, 0, 1), []int{0}, nil)
	})
	xwT := worst(func(a *graph.Node) *graph.Node { return graph.DotGeneral(a, []int{1}, nil, a, []int{1}, nil) })
	t.Logf("Go backend, bfloat16 against float32: x·W within %.3g, x·Wᵀ within %.3g (relative to 1+|y|)", xw, xwT)
	if xw > 0.05 {
		t.Errorf("x·W in bfloat16 off by %.3g", xw)
	}
	if xwT < 0.5 {
		t.Errorf("x·Wᵀ in bfloat16 within %.3g of float32 on the Go backend: GoMLX fixed its bfloat16 products; SetComputeDType may allow bfloat16 there", xwT)
	}
}

// The fused attention is taken exactly where it computes what the
// decomposed attention does, and the backend has it.
func TestFusedAttentionChoice(t *testing.T) {
	fused := compute.Capabilities{Operations: map[compute.OpType]bool{compute.OpTypeFusedScaledDotProductAttention: true}}
	withVJP := compute.Capabilities{Operations: map[compute.OpType]bool{
		compute.OpTypeFusedScaledDotProductAttention: true, compute.OpTypeFusedScaledDotProductAttentionVJP: true}}
	causal, decode, prefill := &attention{causal: true}, &attention{cache: make([]*graph.Node, 1)}, &attention{}
	for _, tt := range []struct {
		name     string
		caps     compute.Capabilities
		bf16     bool
		at       *attention
		dh       int
		env      string
		use, vjp bool
	}{
		{"bf16 scoring/training with the op and its VJP", withVJP, true, causal, 64, "", true, true},
		{"without the VJP: decomposed gradient", fused, true, causal, 128, "", true, false},
		{"float32", withVJP, false, causal, 64, "", false, false},
		{"decoding with a KV cache", withVJP, true, decode, 64, "", false, false},
		{"prefill of left-padded prompts", withVJP, true, prefill, 64, "", false, false},
		{"head width not a multiple of 8", withVJP, true, causal, 6, "", false, false},
		{"turned off", withVJP, true, causal, 64, "0", false, false},
		{"a backend without it", compute.Capabilities{}, true, causal, 64, "", false, false},
		{"the Go backend", testBackend(t).Capabilities(), true, causal, 64, "", false, false},
	} {
		t.Setenv(FusedAttentionEnv, tt.env)
		n := &net{bf16: tt.bf16}
		use, vjp := n.fusedAttention(tt.caps, tt.at, tt.dh)
		if use != tt.use || vjp != tt.vjp {
			t.Errorf("%s: fused %v, VJP %v; want %v, %v", tt.name, use, vjp, tt.use, tt.vjp)
		}
	}
}
