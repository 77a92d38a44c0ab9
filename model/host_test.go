package model

// Test helpers over the parameters, wherever the model holds them.

// param32 is parameter i's values in the graph layout, as float32.
func (m *Model) param32(i int) []float32 {
	v := m.paramValues(i)
	f := make([]float32, len(v))
	for j, x := range v {
		f[j] = float32(x)
	}
	return f
}

// setParam32 sets parameter i from float32 values in the graph layout.
func (m *Model) setParam32(i int, v []float32) {
	f := make([]float64, len(v))
	for j, x := range v {
		f[j] = float64(x)
	}
	m.setParamValues(i, f)
}

// allParams is every parameter's values in the graph layout.
func (m *Model) allParams() [][]float64 {
	out := make([][]float64, len(m.specs))
	for i := range m.specs {
		out[i] = m.paramValues(i)
	}
	return out
}
