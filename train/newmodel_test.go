package train

import (
	"reflect"
	"testing"

	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/tokenizer"
)

// A new model's llama-family options reach the engine: model_type qwen3
// brings query/key norms, head_dim may differ from dim/heads, and
// rope_theta and rope_scaling are kept.
func TestNewModelConfigLlamaOptions(t *testing.T) {
	tok, err := tokenizer.Load("../examples/agents/llama-bpe/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	b, err := backend.New(backend.Sequential)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		m    config.NewModel
		want func(c *model.Config)
	}{
		{"llama defaults", config.NewModel{Family: "llama", Dim: 16, Layers: 1, Heads: 2, MaxSeq: 16},
			func(c *model.Config) { c.ModelType, c.RopeTheta = "llama", 10000 }},
		{"qwen3", config.NewModel{Family: "llama", ModelType: "qwen3", Dim: 16, Layers: 1, Heads: 3, HeadDim: 8, RopeTheta: 1e6, TieEmbeddings: true, MaxSeq: 16},
			func(c *model.Config) {
				c.ModelType, c.QKNorm, c.HeadSize, c.RopeTheta, c.TieEmbeddings = "qwen3", true, 8, 1e6, true
			}},
		{"llama3 rope scaling", config.NewModel{Family: "llama", ModelType: "llama", Dim: 16, Layers: 1, Heads: 2, MaxSeq: 16,
			RopeScaling: &config.RopeScaling{RopeType: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8}},
			func(c *model.Config) {
				c.ModelType, c.RopeTheta = "llama", 10000
				c.RopeScaling = &model.RopeScaling{Type: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nm := tc.m
			if nm.KVHeads == 0 {
				nm.KVHeads = nm.Heads
			}
			nm.Hidden, nm.Activation = 32, "silu"
			m, err := model.New(b, newModelConfig(&nm, tok), 1)
			if err != nil {
				t.Fatal(err)
			}
			got := m.Config()
			want := got
			want.ModelType, want.QKNorm, want.HeadSize, want.RopeTheta, want.RopeScaling, want.TieEmbeddings = "", false, 0, 0, nil, false
			tc.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("engine config\n got %+v\nwant %+v", got, want)
			}
			if got.Dim != 16 || got.Vocab != tok.VocabSize() {
				t.Errorf("dim %d vocab %d, want 16 and the tokenizer's %d", got.Dim, got.Vocab, tok.VocabSize())
			}
		})
	}
}
