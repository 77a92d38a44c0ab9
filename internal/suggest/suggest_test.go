package suggest

import "testing"

func TestClosest(t *testing.T) {
	benchmarks := []string{"aime24", "aime25", "amc23", "gsm8k", "math", "math500", "minerva_math", "olympiadbench"}
	keys := []string{"checkpoint", "lora", "name", "optimizer", "sampling", "template", "tokenizer"}
	tests := []struct {
		s     string
		valid []string
		want  string
	}{
		{"gsm8kk", benchmarks, "gsm8k"},
		{"GSM8K", benchmarks, "gsm8k"},
		{"math-500", benchmarks, "math500"},
		{"aime2024", benchmarks, "aime24"},
		{"optimiser", keys, "optimizer"},
		{"checkpoitn", keys, "checkpoint"},
		{"tset", []string{"test", "train"}, "test"},
		{"learning_rate", keys, ""}, // nothing near
		{"x", keys, ""},
		{"", keys, ""},
		{"lora", nil, ""},
	}
	for _, tt := range tests {
		if got := Closest(tt.s, tt.valid); got != tt.want {
			t.Errorf("Closest(%q) = %q, want %q", tt.s, got, tt.want)
		}
	}
}

func TestDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"abc", "", 3}, {"", "ab", 2}, {"kitten", "sitting", 3}, {"flaw", "lawn", 2}, {"same", "same", 0},
	}
	for _, tt := range tests {
		if got := distance(tt.a, tt.b); got != tt.want {
			t.Errorf("distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
