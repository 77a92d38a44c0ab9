package model

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/hacrl/hacrl/safetensors"
)

// refModel is a plain-Go, float64, one-sequence implementation of both
// architectures exactly as the package doc writes them, reading the tensors
// of a saved checkpoint with Hugging Face's layouts (Conv1D [in,out] for gpt,
// torch.nn.Linear [out,in] for llama). It checks the engine against an
// independent reading of the spec and of the file format.
type refModel struct {
	cfg Config
	w   map[string][]float64
	t   *testing.T
}

func loadRef(t *testing.T, dir string, cfg Config) *refModel {
	ts, _, err := safetensors.Read(filepath.Join(dir, WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	w := map[string][]float64{}
	for name, x := range ts {
		v, err := x.Float64s()
		if err != nil {
			t.Fatal(err)
		}
		w[name] = v
	}
	return &refModel{cfg: cfg.Normalized(), w: w, t: t}
}

func (r *refModel) get(name string) []float64 {
	v, ok := r.w[name]
	if !ok {
		r.t.Fatalf("reference: no tensor %q", name)
	}
	return v
}

// matVec returns y = x·W (W [in,out], inOut) or y = W·x (W [out,in]) plus b.
func matVec(x, w, b []float64, out int, inOut bool) []float64 {
	in := len(x)
	y := make([]float64, out)
	for o := range out {
		s := 0.0
		for i := range in {
			if inOut {
				s += x[i] * w[i*out+o]
			} else {
				s += x[i] * w[o*in+i]
			}
		}
		if b != nil {
			s += b[o]
		}
		y[o] = s
	}
	return y
}

func refNorm(x, gain, bias []float64, eps float64, rms bool) []float64 {
	n := float64(len(x))
	mean, sq := 0.0, 0.0
	for _, v := range x {
		mean += v / n
	}
	if rms {
		mean = 0
	}
	for _, v := range x {
		sq += (v - mean) * (v - mean) / n
	}
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = (v - mean) / math.Sqrt(sq+eps) * gain[i]
		if bias != nil {
			y[i] += bias[i]
		}
	}
	return y
}

func refAct(name string, x float64) float64 {
	switch name {
	case "relu":
		return math.Max(x, 0)
	case "gelu_new":
		return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
	case "silu":
		return x / (1 + math.Exp(-x))
	}
	return 0.5 * x * (1 + math.Erf(x/math.Sqrt2))
}

// refInvFreq returns the rotary inverse frequencies as Hugging Face's
// _compute_default_rope_parameters and _compute_llama3_parameters write
// them: masks over the wavelengths, in float64.
func refInvFreq(c Config) []float64 {
	dh := c.HeadDim()
	f := make([]float64, dh/2)
	for i := range f {
		f[i] = 1 / math.Pow(c.RopeTheta, float64(2*i)/float64(dh))
	}
	if s := c.RopeScaling; s != nil {
		old := float64(s.OriginalMaxPos)
		low, high := old/s.LowFreqFactor, old/s.HighFreqFactor
		for i, v := range f {
			wave := 2 * math.Pi / v
			scaled := v
			if wave > low {
				scaled = v / s.Factor
			}
			smooth := (old/wave - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
			if !(wave < high) && !(wave > low) {
				scaled = (1-smooth)*scaled/s.Factor + smooth*scaled
			}
			f[i] = scaled
		}
	}
	return f
}

// rope rotates one head vector at position pos (rotate_half convention).
func rope(x []float64, pos int, invFreq []float64) []float64 {
	dh := len(x)
	y := make([]float64, dh)
	for i := range dh / 2 {
		a := float64(pos) * invFreq[i]
		c, s := math.Cos(a), math.Sin(a)
		y[i] = x[i]*c - x[i+dh/2]*s
		y[i+dh/2] = x[i+dh/2]*c + x[i]*s
	}
	return y
}

// logProbs returns log p(x[t+1] | x[:t+1]) for t = 0..len(x)−2.
func (r *refModel) logProbs(x []int) []float64 {
	c := r.cfg
	d, H, KVH, dh := c.Dim, c.Heads, c.KVHeads, c.HeadDim()
	gpt := c.Family == "gpt"
	invFreq := refInvFreq(c)
	T := len(x)
	h := make([][]float64, T)
	for t := range T {
		h[t] = make([]float64, d)
		for i := range d {
			if gpt {
				h[t][i] = r.get("wte.weight")[x[t]*d+i] + r.get("wpe.weight")[t*d+i]
			} else {
				h[t][i] = r.get("model.embed_tokens.weight")[x[t]*d+i]
			}
		}
	}
	opt := func(name string) []float64 { return r.w[name] }
	for l := range c.Layers {
		q, k, v := make([][]float64, T), make([][]float64, T), make([][]float64, T)
		var p string
		for t := range T {
			if gpt {
				p = fmt.Sprintf("h.%d.", l)
				a := refNorm(h[t], r.get(p+"ln_1.weight"), r.get(p+"ln_1.bias"), c.NormEps, false)
				qkv := matVec(a, r.get(p+"attn.c_attn.weight"), r.get(p+"attn.c_attn.bias"), 3*d, true)
				q[t], k[t], v[t] = qkv[:d], qkv[d:2*d], qkv[2*d:]
			} else {
				p = fmt.Sprintf("model.layers.%d.", l)
				a := refNorm(h[t], r.get(p+"input_layernorm.weight"), nil, c.NormEps, true)
				q[t] = matVec(a, r.get(p+"self_attn.q_proj.weight"), opt(p+"self_attn.q_proj.bias"), H*dh, false)
				k[t] = matVec(a, r.get(p+"self_attn.k_proj.weight"), opt(p+"self_attn.k_proj.bias"), KVH*dh, false)
				v[t] = matVec(a, r.get(p+"self_attn.v_proj.weight"), opt(p+"self_attn.v_proj.bias"), KVH*dh, false)
				// Qwen3: RMSNorm over each query and key head, then RoPE.
				qn, kn := opt(p+"self_attn.q_norm.weight"), opt(p+"self_attn.k_norm.weight")
				for hd := range H {
					head := q[t][hd*dh : (hd+1)*dh]
					if qn != nil {
						head = refNorm(head, qn, nil, c.NormEps, true)
					}
					copy(q[t][hd*dh:], rope(head, t, invFreq))
				}
				for hd := range KVH {
					head := k[t][hd*dh : (hd+1)*dh]
					if kn != nil {
						head = refNorm(head, kn, nil, c.NormEps, true)
					}
					copy(k[t][hd*dh:], rope(head, t, invFreq))
				}
			}
		}
		for t := range T {
			att := make([]float64, H*dh)
			for hd := range H {
				kv := hd / (H / KVH)
				scores := make([]float64, t+1)
				top := math.Inf(-1)
				for s := 0; s <= t; s++ {
					for i := range dh {
						scores[s] += q[t][hd*dh+i] * k[s][kv*dh+i] / math.Sqrt(float64(dh))
					}
					top = math.Max(top, scores[s])
				}
				sum := 0.0
				for s := range scores {
					scores[s] = math.Exp(scores[s] - top)
					sum += scores[s]
				}
				for s := range scores {
					for i := range dh {
						att[hd*dh+i] += scores[s] / sum * v[s][kv*dh+i]
					}
				}
			}
			var o, m []float64
			if gpt {
				o = matVec(att, r.get(p+"attn.c_proj.weight"), r.get(p+"attn.c_proj.bias"), d, true)
			} else {
				o = matVec(att, r.get(p+"self_attn.o_proj.weight"), opt(p+"self_attn.o_proj.bias"), d, false)
			}
			for i := range d {
				h[t][i] += o[i]
			}
			if gpt {
				a := refNorm(h[t], r.get(p+"ln_2.weight"), r.get(p+"ln_2.bias"), c.NormEps, false)
				f := matVec(a, r.get(p+"mlp.c_fc.weight"), r.get(p+"mlp.c_fc.bias"), c.Hidden, true)
				for i := range f {
					f[i] = refAct(c.Activation, f[i])
				}
				m = matVec(f, r.get(p+"mlp.c_proj.weight"), r.get(p+"mlp.c_proj.bias"), d, true)
			} else {
				a := refNorm(h[t], r.get(p+"post_attention_layernorm.weight"), nil, c.NormEps, true)
				g := matVec(a, r.get(p+"mlp.gate_proj.weight"), nil, c.Hidden, false)
				u := matVec(a, r.get(p+"mlp.up_proj.weight"), nil, c.Hidden, false)
				for i := range g {
					g[i] = refAct("silu", g[i]) * u[i]
				}
				m = matVec(g, r.get(p+"mlp.down_proj.weight"), nil, d, false)
			}
			for i := range d {
				h[t][i] += m[i]
			}
		}
	}
	head := r.w["lm_head.weight"]
	if head == nil {
		head = r.get(c.embeddingName())
	}
	var lp []float64
	for t := 0; t+1 < T; t++ {
		var a []float64
		if gpt {
			a = refNorm(h[t], r.get("ln_f.weight"), r.get("ln_f.bias"), c.NormEps, false)
		} else {
			a = refNorm(h[t], r.get("model.norm.weight"), nil, c.NormEps, true)
		}
		logits := matVec(a, head, nil, c.Vocab, false)
		lp = append(lp, logits[x[t+1]]-logSumExp(logits))
	}
	return lp
}

// The engine matches the plain-Go reference reading of the spec and of the
// saved Hugging Face tensors, for every tiny config.
func TestMatchesReference(t *testing.T) {
	ctx := context.Background()
	x := []int{3, 14, 15, 9, 2, 6, 5, 3, 5, 8, 9, 7}
	for name, cfg := range tinyConfigs {
		m := newTiny(t, name, 31)
		// Weights well beyond their initial scale make attention sharp, so
		// that positions and head wiring matter to the result.
		rng := rand.New(rand.NewPCG(31, 31))
		for i := range m.specs {
			v := m.paramValues(i)
			for j := range v {
				v[j] += 0.25 * rng.NormFloat64()
			}
			m.setParamValues(i, v)
		}
		dir := t.TempDir()
		if err := m.Save(dir); err != nil {
			t.Fatal(err)
		}
		want := loadRef(t, dir, cfg).logProbs(x)
		got, err := m.Score(ctx, []Sequence{{Prompt: x[:2], Response: x[2:]}}, false)
		if err != nil {
			t.Fatal(err)
		}
		for j, lp := range got.LogProbs[0] {
			if d := math.Abs(float64(lp) - want[j+1]); d > 1e-4 {
				t.Errorf("%s: token %d: engine log-prob %v, reference %v", name, j+2, lp, want[j+1])
			}
		}
		// The native decoder, fed the prompt and then one token per step
		// (a second row beside it, so that rows interleave in the cache).
		dec, release, err := m.decoder()
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		cache := dec.newCache(2, len(x))
		logits := dec.forward(cache, []int{1, 0}, [][]int{{7, 7, 7}, x[:2]})
		for j := 2; j < len(x); j++ {
			row := logits[cfg.Vocab:]
			if j > 2 {
				row = logits
			}
			l := make([]float64, cfg.Vocab)
			for i, v := range row[:cfg.Vocab] {
				l[i] = float64(v)
			}
			if lp := l[x[j]] - logSumExp(l); math.Abs(lp-want[j-1]) > 1e-4 {
				t.Errorf("%s: native decoder: token %d: log-prob %v, reference %v", name, j, lp, want[j-1])
			}
			logits = dec.forward(cache, []int{0}, [][]int{{x[j]}})
		}
	}
}

// logSumExp is log Σ exp(x), computed stably.
func logSumExp(x []float64) float64 {
	top := math.Inf(-1)
	for _, v := range x {
		top = max(top, v)
	}
	s := 0.0
	for _, v := range x {
		s += math.Exp(v - top)
	}
	return top + math.Log(s)
}
