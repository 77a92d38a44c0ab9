package config

import (
	"reflect"
	"strings"
	"testing"
)

// TestLoRASection: an agent's lora section takes its defaults (alpha
// 2·rank, target_modules all-linear), reads target_modules as a list or the
// string all-linear, round-trips through Marshal, and refuses impossible
// settings by key path and line.
func TestLoRASection(t *testing.T) {
	withLoRA := func(a, b string) string {
		src := strings.Replace(valid, "optimizer: {lr: 0.001}\n", "optimizer: {lr: 0.001}\n    lora: "+a+"\n", 1)
		return strings.Replace(src, "optimizer: {lr: 0.001, schedule: cosine}\n", "optimizer: {lr: 0.001, schedule: cosine}\n    lora: "+b+"\n", 1)
	}
	c, err := Parse([]byte(withLoRA("{rank: 16}", "{rank: 4, alpha: 8.5, target_modules: [q_proj, v_proj], use_rslora: true}")))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := *c.Agents[0].LoRA, (LoRA{Rank: 16, Alpha: 32, TargetModules: Modules{AllLinear}}); !reflect.DeepEqual(got, want) {
		t.Errorf("defaults: got %+v, want %+v", got, want)
	}
	if got, want := *c.Agents[1].LoRA, (LoRA{Rank: 4, Alpha: 8.5, TargetModules: Modules{"q_proj", "v_proj"}, UseRSLoRA: true}); !reflect.DeepEqual(got, want) {
		t.Errorf("given: got %+v, want %+v", got, want)
	}
	data, err := Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if !sameValues(c, back) {
		t.Errorf("round trip differs:\n%s", data)
	}
	clone := c.Clone()
	clone.Agents[1].LoRA.TargetModules[0] = "k_proj"
	if c.Agents[1].LoRA.TargetModules[0] != "q_proj" {
		t.Error("clone shares the lora section")
	}
	c, err = Parse([]byte(withLoRA("{rank: 8, target_modules: all-linear, dropout: 0}", "{rank: 8, target_modules: [model.layers.0.mlp.up_proj]}")))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Agents[0].LoRA.TargetModules; !reflect.DeepEqual(got, Modules{AllLinear}) {
		t.Errorf("target_modules: all-linear read as %q", got)
	}

	tests := []struct{ name, a, want string }{
		{"no rank", "{alpha: 16}", "agents[0].lora.rank (line 14): required (> 0)"},
		{"negative rank", "{rank: -2}", "agents[0].lora.rank (line 14): must be > 0, got -2"},
		{"fractional rank", "{rank: 2.5}", `agents[0].lora.rank (line 14): cannot read "2.5" as an integer`},
		{"negative alpha", "{rank: 8, alpha: -1}", "agents[0].lora.alpha (line 14): must be > 0, got -1"},
		{"zero alpha", "{rank: 8, alpha: 0}", "agents[0].lora.alpha (line 14): must not be 0; leave the key out for the default (2·rank)"},
		{"dropout", "{rank: 8, dropout: 0.05}", "agents[0].lora.dropout (line 14): must be 0 (adapter dropout is not implemented), got 0.05"},
		{"empty targets", "{rank: 8, target_modules: []}", "agents[0].lora.target_modules (line 14): must not be empty; leave the key out for the default (all-linear)"},
		{"string targets", "{rank: 8, target_modules: q_proj}", `agents[0].lora.target_modules (line 14): must be a list of module names or all-linear, got "q_proj"`},
		{"unknown module", "{rank: 8, target_modules: [q_proj, qproj]}", `agents[0].lora.target_modules[1] (line 14): must be one of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, c_attn, c_proj, c_fc, a full module path, or all-linear, got "qproj"`},
		{"all-linear with others", "{rank: 8, target_modules: [all-linear, q_proj]}", "agents[0].lora.target_modules[0] (line 14): all-linear adapts every linear layer"},
		{"unknown key", "{rank: 8, lora_alpha: 16}", "agents[0].lora.lora_alpha (line 14): unknown key; valid keys here: alpha, dropout, rank, target_modules, use_rslora"},
		{"not a mapping", "16", "agents[0].lora (line 14): expected a mapping of keys"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(withLoRA(tc.a, "{rank: 4}")))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
