package model

import "math"

// ropeFrequencies returns the rotary inverse frequencies of a llama-family
// config, one per pair of head dimensions: Hugging Face's default
// inv_freq_i = θ^(−2i/Dh) for i < Dh/2, rescaled as RopeScaling says (see
// RopeScaling). Both engines turn them into float32 before use, as
// Hugging Face keeps them.
func (c Config) ropeFrequencies() []float64 {
	dh := c.HeadDim()
	f := make([]float64, dh/2)
	for i := range f {
		f[i] = 1 / math.Pow(c.RopeTheta, float64(2*i)/float64(dh))
	}
	s := c.RopeScaling
	if s == nil {
		return f
	}
	// "llama3": keep the high frequencies, divide the low ones by Factor,
	// interpolate in between.
	old := float64(s.OriginalMaxPos)
	lowWave, highWave := old/s.LowFreqFactor, old/s.HighFreqFactor
	for i, v := range f {
		wave := 2 * math.Pi / v
		switch {
		case wave < highWave:
		case wave > lowWave:
			f[i] = v / s.Factor
		default:
			smooth := (old/wave - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
			f[i] = (1-smooth)*v/s.Factor + smooth*v
		}
	}
	return f
}
