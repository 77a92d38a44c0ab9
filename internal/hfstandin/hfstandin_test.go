package hfstandin

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/internal/npmtest"
	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/tokenizer"
)

// A stand-in loads as the published model's architecture at its smaller
// sizes, in bfloat16 shards with an index, with the published end tokens
// and the real tokenizer.
func TestWrite(t *testing.T) {
	npmDir := npmtest.Dir(t)
	b, err := backend.New(backend.Sequential)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, tok string
		want      model.Config
		eos       []int
	}{
		{Qwen3_0_6B, "qwen3", model.Config{Family: "llama", ModelType: "qwen3", Vocab: 151936, Dim: 64, Layers: 2,
			Heads: 4, KVHeads: 2, Hidden: 192, MaxSeq: 40960, Activation: "silu", NormEps: 1e-6, RopeTheta: 1e6,
			TieEmbeddings: true, BOS: 151643, EOS: 151645, HeadSize: 32, QKNorm: true, DType: "bfloat16"},
			[]int{151645, 151643}},
		// head_dim 16 = hidden/heads reads as the default (0).
		{Llama3_2_1BInstruct, "llama3", model.Config{Family: "llama", ModelType: "llama", Vocab: 128256, Dim: 128, Layers: 2,
			Heads: 8, KVHeads: 2, Hidden: 512, MaxSeq: 131072, Activation: "silu", NormEps: 1e-5, RopeTheta: 5e5,
			TieEmbeddings: true, BOS: 128000, EOS: 128001, DType: "bfloat16",
			RopeScaling: &model.RopeScaling{Type: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192}},
			[]int{128001, 128008, 128009}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), tt.name)
			if err := Write(b, dir, npmtest.Model(npmDir, tt.tok), Small(tt.name, 1)); err != nil {
				t.Fatal(err)
			}
			m, err := model.Load(b, dir)
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Config(); !configEqual(got, tt.want) {
				t.Errorf("config %+v\nwant %+v", got, tt.want)
			}
			if gen, ok := m.GenerationConfig(); !ok || !slices.Equal(gen.EOSTokenIDs, tt.eos) {
				t.Errorf("generation config %+v (%v), want eos %v", gen, ok, tt.eos)
			}
			l, err := ReadLayout(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(l.Shards) < 2 || l.DTypes["BF16"] != l.Tensors || l.Tensors == 0 {
				t.Errorf("layout %+v, want several shards of BF16 tensors only", l)
			}
			tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
			if err != nil {
				t.Fatal(err)
			}
			if tok.VocabSize() > m.Config().Vocab {
				t.Errorf("tokenizer has %d tokens, the model %d", tok.VocabSize(), m.Config().Vocab)
			}
		})
	}
	if _, err := Published("Qwen3-7B", model.ConfigFile); err == nil {
		t.Error("Published of an unknown model: no error")
	}
}

func configEqual(a, b model.Config) bool {
	ra, rb := a.RopeScaling, b.RopeScaling
	a.RopeScaling, b.RopeScaling = nil, nil
	if a != b {
		return false
	}
	return (ra == nil) == (rb == nil) && (ra == nil || *ra == *rb)
}
