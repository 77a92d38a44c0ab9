package model

import (
	"fmt"
	"math"
)

// paramSpec describes one parameter tensor: its Hugging Face name and shape,
// how New initializes it, and whether AdamW decays it.
type paramSpec struct {
	name  string
	shape []int
	std   float64 // normal(0, std); 0 means constant fill
	fill  float64 // constant value when std == 0 (1 for norm gains, 0 for biases)
	decay bool    // weight decay applies (matrices and embeddings, not biases or norm gains)
	// transposed marks a torch.nn.Linear weight: [out,in] in files, held as
	// [in,out] (shape) in memory so that x·W is a plain matmul on the backend.
	transposed bool
	// origin says which config.json fields give the shape, for the error
	// about a checkpoint tensor of another shape ("" for the obvious ones).
	origin string
}

// fileShape is the shape of the parameter in a checkpoint.
func (p paramSpec) fileShape() []int {
	if p.transposed {
		return []int{p.shape[1], p.shape[0]}
	}
	return p.shape
}

// originNote is " (from <origin>)", or "" without an origin.
func (p paramSpec) originNote() string {
	if p.origin == "" {
		return ""
	}
	return " (from " + p.origin + ")"
}

func (p paramSpec) size() int {
	n := 1
	for _, d := range p.shape {
		n *= d
	}
	return n
}

// paramSpecs lists the parameters of c in a fixed order (the order of the
// graph inputs and of the initialization draws).
func (c Config) paramSpecs() []paramSpec {
	const std = 0.02
	resid := std / math.Sqrt(2*float64(c.Layers)) // GPT-2's scaled init of residual projections
	matrix := func(name string, std float64, shape ...int) paramSpec {
		return paramSpec{name: name, shape: shape, std: std, decay: true}
	}
	linear := func(name string, std float64, out, in int) paramSpec { // torch.nn.Linear weight [out,in]
		return paramSpec{name: name, shape: []int{in, out}, std: std, decay: true, transposed: true}
	}
	vector := func(name string, fill float64, n int) paramSpec {
		return paramSpec{name: name, shape: []int{n}, fill: fill}
	}
	d, hid, dh := c.Dim, c.Hidden, c.HeadDim()
	var ps []paramSpec
	switch c.Family {
	case "gpt":
		ps = append(ps, matrix("wte.weight", std, c.Vocab, d), matrix("wpe.weight", std, c.MaxSeq, d))
		for l := range c.Layers {
			p := fmt.Sprintf("h.%d.", l)
			ps = append(ps,
				vector(p+"ln_1.weight", 1, d), vector(p+"ln_1.bias", 0, d),
				matrix(p+"attn.c_attn.weight", std, d, 3*d), vector(p+"attn.c_attn.bias", 0, 3*d),
				matrix(p+"attn.c_proj.weight", resid, d, d), vector(p+"attn.c_proj.bias", 0, d),
				vector(p+"ln_2.weight", 1, d), vector(p+"ln_2.bias", 0, d),
				matrix(p+"mlp.c_fc.weight", std, d, hid), vector(p+"mlp.c_fc.bias", 0, hid),
				matrix(p+"mlp.c_proj.weight", resid, hid, d), vector(p+"mlp.c_proj.bias", 0, d))
		}
		ps = append(ps, vector("ln_f.weight", 1, d), vector("ln_f.bias", 0, d))
	case "llama":
		q, kv := c.Heads*dh, c.KVHeads*dh
		ps = append(ps, matrix("model.embed_tokens.weight", std, c.Vocab, d))
		for l := range c.Layers {
			p := fmt.Sprintf("model.layers.%d.", l)
			first := len(ps)
			ps = append(ps, vector(p+"input_layernorm.weight", 1, d),
				linear(p+"self_attn.q_proj.weight", std, q, d),
				linear(p+"self_attn.k_proj.weight", std, kv, d),
				linear(p+"self_attn.v_proj.weight", std, kv, d))
			if c.AttentionBias {
				ps = append(ps, vector(p+"self_attn.q_proj.bias", 0, q),
					vector(p+"self_attn.k_proj.bias", 0, kv), vector(p+"self_attn.v_proj.bias", 0, kv))
			}
			if c.QKNorm {
				ps = append(ps, vector(p+"self_attn.q_norm.weight", 1, dh), vector(p+"self_attn.k_norm.weight", 1, dh))
			}
			ps = append(ps, linear(p+"self_attn.o_proj.weight", resid, d, q))
			for i := first + 1; i < len(ps); i++ {
				ps[i].origin = fmt.Sprintf("config.json: head_dim %d, num_attention_heads %d, num_key_value_heads %d, hidden_size %d",
					dh, c.Heads, c.KVHeads, d)
			}
			if c.outputBias() {
				ps = append(ps, vector(p+"self_attn.o_proj.bias", 0, d))
			}
			ps = append(ps, vector(p+"post_attention_layernorm.weight", 1, d),
				linear(p+"mlp.gate_proj.weight", std, hid, d),
				linear(p+"mlp.up_proj.weight", std, hid, d),
				linear(p+"mlp.down_proj.weight", resid, d, hid))
		}
		ps = append(ps, vector("model.norm.weight", 1, d))
	}
	if !c.TieEmbeddings {
		ps = append(ps, matrix("lm_head.weight", std, c.Vocab, d))
	}
	return ps
}

// outputBias reports whether o_proj has a bias: Llama's attention_bias covers
// all four projections, Qwen2 has biases on q, k and v only.
func (c Config) outputBias() bool { return c.AttentionBias && c.ModelType != "qwen2" }

// embeddingName is the token embedding matrix, which a tied LM head reuses.
func (c Config) embeddingName() string {
	if c.Family == "gpt" {
		return "wte.weight"
	}
	return "model.embed_tokens.weight"
}

// initialValues draws the initial parameter values from a generator seeded
// with seed, in paramSpecs order, so the same config and seed always give the
// same weights.
func initialValues(specs []paramSpec, seed int64) [][]float64 {
	rng := initRNG(seed)
	values := make([][]float64, len(specs))
	for i, s := range specs {
		v := make([]float64, s.size())
		for j := range v {
			if s.std > 0 {
				v[j] = s.std * rng.NormFloat64()
			} else {
				v[j] = s.fill
			}
		}
		values[i] = v
	}
	return values
}
