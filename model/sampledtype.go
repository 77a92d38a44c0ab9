package model

import (
	"fmt"

	"github.com/hacrl/hacrl/internal/kernel"
	"github.com/hacrl/hacrl/safetensors"
)

// Sampling with bfloat16 weights.
//
// SetSampleDType("bfloat16") makes Generate (and a Batch's steps) read a
// bfloat16 copy of the weights every product multiplies by — the
// projections of every layer and the LM head (the tied embeddings too, for
// the head only) — rounded to nearest even from the float32 weights and
// made again after each update, the first time the model samples. The
// decoding steps then read half the bytes; the model's float32 weights are
// still what Score, training and Save use, so the log-probs a method takes
// as the old policy's come from them, and the samples' own log-probs
// (Sample.LogProbs) differ from those by the gap bfloat16 rounding opens.
// The copy costs 2 bytes per weight on top of the float32 ones.

// SetSampleDType chooses the weights Generate samples with: WeightsFloat32
// (the default: the model's own) or WeightsBFloat16 (a bfloat16 copy, see
// above). It needs the native engine.
func (m *Model) SetSampleDType(dtype string) error {
	switch {
	case dtype == WeightsFloat32 || dtype == "":
		m.sampleBF16 = false
		return nil
	case dtype != WeightsBFloat16:
		return fmt.Errorf("model: sample dtype %q: want %q or %q", dtype, WeightsFloat32, WeightsBFloat16)
	case !m.native():
		return fmt.Errorf("model: sample dtype bfloat16 runs on the native engine (engine native, or auto on the Go backend)")
	}
	m.sampleBF16 = true
	return nil
}

// SampleDType is the dtype of the weights Generate samples with
// (SetSampleDType).
func (m *Model) SampleDType() string {
	if m.sampleBF16 {
		return WeightsBFloat16
	}
	return WeightsFloat32
}

// samplingDecoder is decoder for the sampler: the model's decoder or, with
// a bfloat16 sample dtype, its copy with bfloat16 product weights, made
// again whenever the decoder is (after every update). release is the
// decoder's.
func (m *Model) samplingDecoder() (dec *decoder, release func(), err error) {
	dec, release, err = m.decoder()
	if err != nil || !m.sampleBF16 {
		return dec, release, err
	}
	m.sampleMu.Lock()
	defer m.sampleMu.Unlock()
	if m.sampleOf != dec {
		m.sampleDec, m.sampleOf = dec.withBF16Weights(), dec
	}
	return m.sampleDec, release, nil
}

// withBF16Weights returns a copy of dec whose products read their weights
// rounded to bfloat16 (to nearest, ties to even); everything else,
// embeddings and adapters included, is dec's.
func (dec *decoder) withBF16Weights() *decoder {
	c := *dec
	c.layers = append([]decoderLayer(nil), dec.layers...)
	round := func(p *proj) {
		if p.w == nil {
			return // bfloat16 already (a frozen base)
		}
		wb := make([]uint16, len(p.w))
		kernel.Parallel(len(wb), 1<<16, func(lo, hi int) {
			for i, x := range p.w[lo:hi] {
				wb[lo+i] = safetensors.Float32ToBFloat16(x)
			}
		})
		p.w, p.wb, p.packed = nil, wb, nil
	}
	for i := range c.layers {
		ly := &c.layers[i]
		round(&ly.qkv)
		round(&ly.out)
		round(&ly.up)
		round(&ly.down)
	}
	round(&c.head)
	return &c
}

// DecodeWeightBytes is the weight bytes one decoding step of Generate
// reads: every product's weights as the sampler holds them (4 bytes a
// float32 value, 2 a bfloat16 one) with their biases, the adapters' and
// the norms' gains — not the embedding rows it gathers (unless the LM head
// is tied to them, which the head reads whole).
func (m *Model) DecodeWeightBytes() (int64, error) {
	dec, release, err := m.samplingDecoder()
	if err != nil {
		return 0, err
	}
	defer release()
	var n int64
	f32 := func(v ...[]float32) {
		for _, x := range v {
			n += 4 * int64(len(x))
		}
	}
	product := func(p proj) {
		f32(p.w, p.b)
		n += 2 * int64(len(p.wb))
		if lr := p.lora; lr != nil {
			f32(lr.a, lr.wbd)
		}
	}
	for _, ly := range dec.layers {
		product(ly.qkv)
		product(ly.out)
		product(ly.up)
		product(ly.down)
		f32(ly.norm1W, ly.norm1B, ly.norm2W, ly.norm2B, ly.qNormW, ly.kNormW)
	}
	product(dec.head)
	f32(dec.normW, dec.normB)
	return n, nil
}
