package config

import (
	"slices"
	"testing"
)

func TestCompleteKey(t *testing.T) {
	names := []string{"llama-bpe", "gpt-char"}
	tests := []struct {
		typed string
		want  []string // all of these, and each result extends typed
		not   []string // none of these
	}{
		{"st", []string{"steps="}, []string{"seed="}},
		{"", []string{"steps=", "seed=", "method.", "agents[", "agents=", "eval.", "batch."}, nil},
		{"method.n", []string{"method.name="}, nil},
		{"batch.mi", []string{"batch.mini_batch=", "batch.micro_batch="}, nil},
		{"agents[", []string{"agents[0].", "agents[1].", "agents[gpt-char].", "agents[llama-bpe]."}, []string{"agents[2]."}},
		{"agents[l", []string{"agents[llama-bpe]."}, []string{"agents[0]."}},
		{"agents[0].opt", []string{"agents[0].optimizer."}, nil},
		{"agents[llama-bpe].optimizer.l", []string{"agents[llama-bpe].optimizer.lr="}, nil},
		{"agents[llama-bpe].fro", []string{"agents[llama-bpe].frozen_dtype="}, nil},
		{"agents[0].sample_d", []string{"agents[0].sample_dtype="}, nil},
		{"agents[0].lora.target", []string{"agents[0].lora.target_modules="}, nil}, // a list of names: given whole
		{"agents[0].template.v", []string{"agents[0].template.vars="}, nil},        // a map: given whole
		{"eval.sets[", []string{"eval.sets[0]."}, nil},
		{"eval.sets[0].pro", []string{"eval.sets[0].problems="}, nil},
		{"nosuch.", nil, []string{"nosuch.x="}},
		{"steps.", nil, nil}, // a value has no keys under it
		{"agents[0]x", nil, nil},
	}
	for _, tt := range tests {
		got := CompleteKey(tt.typed, 2, names)
		for _, w := range tt.want {
			if !slices.Contains(got, w) {
				t.Errorf("CompleteKey(%q) = %q, lacks %q", tt.typed, got, w)
			}
		}
		for _, w := range tt.not {
			if slices.Contains(got, w) {
				t.Errorf("CompleteKey(%q) = %q, has %q", tt.typed, got, w)
			}
		}
		if tt.want == nil && len(got) > 0 {
			t.Errorf("CompleteKey(%q) = %q, want nothing", tt.typed, got)
		}
		for _, g := range got {
			if len(g) < len(tt.typed) || g[:len(tt.typed)] != tt.typed {
				t.Errorf("CompleteKey(%q) offers %q, which does not extend it", tt.typed, g)
			}
		}
	}
	// An agent's name may hold dots, also while it is being typed.
	for typed, want := range map[string]string{
		"agents[llama3.":                    "agents[llama3.2-1b].",
		"agents[llama3.2-1b].sampling.temp": "agents[llama3.2-1b].sampling.temperature=",
	} {
		if got := CompleteKey(typed, 1, []string{"llama3.2-1b"}); !slices.Equal(got, []string{want}) {
			t.Errorf("CompleteKey(%q) = %q, want [%q]", typed, got, want)
		}
	}
	// Every completed key parses as a --set key.
	for _, k := range CompleteKey("agents[0].sampling.", 2, names) {
		if _, err := ParseSet(k + "1"); err != nil {
			t.Errorf("completed %q: %v", k, err)
		}
	}
}
