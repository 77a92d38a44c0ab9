package train

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/backend"
)

// LoadSaved applies a template choice over the saved agent.json: kind and
// system replace the saved ones, vars only go with an hf template; the
// agent it loads samples with the template's stop tokens.
func TestLoadSavedChoice(t *testing.T) {
	dir := filepath.Join("..", "examples", "agents", "llama-bpe") // saved: chat, no system
	sys := "Add."
	tests := []struct {
		choice       TemplateChoice
		kind, system string
		wantErr      string
	}{
		{TemplateChoice{}, "chat", "", ""},
		{TemplateChoice{Kind: "plain"}, "plain", "", ""},
		{TemplateChoice{System: &sys}, "chat", "Add.", ""},
		{TemplateChoice{Vars: map[string]any{"enable_thinking": false}}, "", "", "vars apply to kind"},
		{TemplateChoice{Kind: "hf"}, "", "", "tokenizer_config.json"},
	}
	for _, tt := range tests {
		s, err := LoadSaved(dir, tt.choice)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%+v: error %v, want %q", tt.choice, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%+v: %v", tt.choice, err)
		}
		if s.Template.Kind != tt.kind || s.Template.System != tt.system || !s.HasMeta || s.Meta.Name != "llama-bpe" {
			t.Errorf("%+v: template %+v, meta %+v", tt.choice, s.Template, s.Meta)
		}
	}
	s, err := LoadSaved(dir, TemplateChoice{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := backend.New(backend.Choose(""))
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Agent(b)
	if err != nil {
		t.Fatal(err)
	}
	imEnd, _ := a.Tok.TokenID("<|im_end|>")
	if a.Sampling.MaxNewTokens != 32 || len(a.Sampling.Stop) != 2 || a.Sampling.Stop[1] != imEnd || a.Task == nil {
		t.Errorf("agent sampling %+v, task %v", a.Sampling, a.Task)
	}
}
