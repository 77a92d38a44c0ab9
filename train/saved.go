package train

import (
	"fmt"
	"maps"
	"path/filepath"

	"github.com/gomlx/compute"
	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/tokenizer"
)

// TemplateChoice replaces parts of a saved agent's template, as the
// commands that run one agent alone (hacrl generate, score, prompt) allow.
type TemplateChoice struct {
	Kind   string         // "" keeps the saved kind
	System *string        // nil keeps the saved system text
	Vars   map[string]any // set over the saved vars, name by name
}

// Saved is a saved agent's tokenizer and prompt template, read without its
// weights (Agent loads them).
type Saved struct {
	Dir     string
	Meta    Meta // agent.json, or the defaults of a checkpoint without one
	HasMeta bool // dir has an agent.json
	TokPath string
	Tok     tokenizer.Tokenizer
	// Template is the saved template with the choice applied, ready to
	// render (an hf template compiled, see PrepareTemplate).
	Template tokenizer.Template
}

// LoadSaved reads the agent.json and tokenizer of checkpoint dir and
// prepares its template with c applied. Saved vars carry over only while
// the kind stays hf; vars given for another kind are an error.
func LoadSaved(dir string, c TemplateChoice) (*Saved, error) {
	meta, found, err := readMeta(dir)
	if err != nil {
		return nil, err
	}
	s := &Saved{Dir: dir, Meta: meta, HasMeta: found, TokPath: filepath.Join(dir, "tokenizer.json")}
	if s.Tok, err = tokenizer.Load(s.TokPath); err != nil {
		return nil, err
	}
	t := tokenizer.Template{Kind: meta.Template.Kind, System: meta.Template.System}
	if c.Kind != "" {
		t.Kind = c.Kind
	}
	if c.System != nil {
		t.System = *c.System
	}
	if t.Kind == tokenizer.KindHF && meta.Template.Kind == tokenizer.KindHF {
		t.Vars = maps.Clone(meta.Template.Vars)
	}
	if len(c.Vars) > 0 {
		if t.Vars == nil {
			t.Vars = map[string]any{}
		}
		maps.Copy(t.Vars, c.Vars)
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if err := PrepareTemplate(&t, s.TokPath, s.Tok, nil); err != nil { // the weights' end tokens join in Agent
		return nil, err
	}
	s.Template = t
	return s, nil
}

// Agent loads the saved agent's weights on b and returns it ready to
// generate and score alone: its template, and the sampling settings of its
// agent.json with the template's stop tokens. It has no trainer.
func (s *Saved) Agent(b compute.Backend) (*Agent, error) {
	m, err := model.Load(b, s.Dir)
	if err != nil {
		return nil, err
	}
	if err := CheckVocab(s.Tok, s.TokPath, m); err != nil {
		return nil, err
	}
	tmpl := s.Template
	if err := addGenerationStops(&tmpl, s.TokPath, s.Tok, m); err != nil {
		return nil, err
	}
	smp := s.Meta.Sampling
	config.FillDefaults(&smp) // an agent.json may leave settings out
	a := &Agent{Name: s.Meta.Name, Model: m, Tok: s.Tok, Template: tmpl, Task: s.Meta.Task,
		Sampling: model.SampleOptions{MaxNewTokens: smp.MaxNewTokens, Temperature: *smp.Temperature,
			TopP: smp.TopP, TopK: smp.TopK, Stop: tmpl.StopTokens(s.Tok), Vocab: s.Tok.VocabSize()}}
	if len(a.Sampling.Stop) == 0 {
		return nil, fmt.Errorf("%s: tokenizer %s has no EOS token to end responses with", s.Dir, s.TokPath)
	}
	return a, nil
}
