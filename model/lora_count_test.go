package model

import (
	"strings"
	"testing"
)

// NumTrainable is NumParams without adapters and, with them, r·(in+out)
// summed over the adapted modules, each module's shape taken from the
// config as Hugging Face's model of that architecture has it.
func TestNumTrainable(t *testing.T) {
	const r = 3
	for _, c := range loraCases {
		m := newTiny(t, c.model, 3)
		if got, want := m.NumTrainable(), m.NumParams(); got != want {
			t.Errorf("%s without adapters: NumTrainable %d, want NumParams %d", c.model, got, want)
		}
		if err := m.AddLoRA(LoRA{Rank: r, Alpha: 6, Targets: c.targets}, 1); err != nil {
			t.Fatal(err)
		}
		cfg := m.Config()
		d, hid := cfg.Dim, cfg.Hidden
		q, kv := cfg.Heads*cfg.HeadDim(), cfg.KVHeads*cfg.HeadDim()
		shapes := map[string][2]int{ // module: in, out
			"self_attn.q_proj": {d, q}, "self_attn.k_proj": {d, kv}, "self_attn.v_proj": {d, kv}, "self_attn.o_proj": {q, d},
			"mlp.gate_proj": {d, hid}, "mlp.up_proj": {d, hid}, "mlp.down_proj": {hid, d},
		}
		if cfg.Family == "gpt" {
			shapes = map[string][2]int{"attn.c_attn": {d, 3 * d}, "attn.c_proj": {d, d}, "mlp.c_fc": {d, hid}, "mlp.c_proj": {hid, d}}
		}
		var want int64
		for name, s := range shapes {
			for _, tgt := range c.targets {
				if tgt == AllLinear || name == tgt || strings.HasSuffix(name, "."+tgt) {
					want += int64(cfg.Layers * r * (s[0] + s[1]))
					break
				}
			}
		}
		if got := m.NumTrainable(); got != want || want == 0 {
			t.Errorf("%s, targets %q: NumTrainable %d, want %d", c.model, c.targets, got, want)
		}
		if got := m.Base().NumTrainable(); got != m.NumParams() {
			t.Errorf("%s: the base's NumTrainable %d, want NumParams %d", c.model, got, m.NumParams())
		}
	}
}
