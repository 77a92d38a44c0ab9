package train

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"

	"github.com/gomlx/compute"
	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/internal/atomicfile"
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
// weights (Agent loads them). A LoRA agent is a base model plus an adapter
// directory (model.IsAdapterDir): its tokenizer and agent.json are the
// adapter's when it has them (as the final agents of a run do), else the
// base's.
type Saved struct {
	Dir     string // where agent.json was looked for
	Base    string // the model directory the weights load from
	Adapter string // the LoRA adapter loaded onto Base; "" for none
	Meta    Meta   // agent.json, or the defaults of a checkpoint without one (see DefaultTemplateKind)
	HasMeta bool   // dir has an agent.json
	TokPath string
	Tok     tokenizer.Tokenizer
	// Template is the saved template with the choice applied, ready to
	// render (an hf template compiled, see PrepareTemplate).
	Template tokenizer.Template
}

// LoadSaved reads the agent.json and tokenizer of checkpoint dir and
// prepares its template with c applied. Saved vars carry over only while
// the kind stays hf; vars given for another kind are an error.
// A dir that is a LoRA adapter loads onto the base its adapter_config.json
// names (see LoadSavedAdapter).
func LoadSaved(dir string, c TemplateChoice) (*Saved, error) {
	if err := ModelDirError("checkpoint", dir); err != nil {
		return nil, err
	}
	if model.IsAdapterDir(dir) {
		return LoadSavedAdapter("", dir, c)
	}
	return loadSaved(dir, dir, dir, "", c)
}

// LoadSavedAdapter is LoadSaved for the LoRA adapter in directory adapter
// on the model in directory base; base "" takes the adapter's
// base_model_name_or_path (a path, as a run's final agents record it).
func LoadSavedAdapter(base, adapter string, c TemplateChoice) (*Saved, error) {
	if err := ModelDirError("adapter", adapter); err != nil {
		return nil, err
	}
	if !model.IsAdapterDir(adapter) {
		return nil, fmt.Errorf("%s is not a LoRA adapter: it has no %s", adapter, model.AdapterConfigFile)
	}
	base, err := AdapterBase(base, adapter)
	if err != nil {
		return nil, err
	}
	metaDir, tokDir := base, base
	if _, err := os.Stat(filepath.Join(adapter, "agent.json")); err == nil {
		metaDir = adapter
	}
	if _, err := os.Stat(filepath.Join(adapter, "tokenizer.json")); err == nil {
		tokDir = adapter
	}
	return loadSaved(metaDir, tokDir, base, adapter, c)
}

// AdapterBase is the base model directory of the LoRA adapter in directory
// adapter: base when given, else the adapter's base_model_name_or_path. It
// must be a model directory (config.json), not another adapter.
func AdapterBase(base, adapter string) (string, error) {
	if base == "" {
		_, named, err := model.ReadAdapterConfig(adapter)
		if err != nil {
			return "", err
		}
		if named == "" {
			return "", fmt.Errorf("adapter %s names no base model (base_model_name_or_path in %s): give its base (--base DIR)", adapter, model.AdapterConfigFile)
		}
		if _, err := os.Stat(filepath.Join(named, "config.json")); err != nil {
			return "", fmt.Errorf("adapter %s: its base %q (base_model_name_or_path in %s) is not a model directory here: give its base (--base DIR)%s", adapter, named, model.AdapterConfigFile, hubHint(named))
		}
		return named, nil
	}
	if err := ModelDirError("base", base); err != nil {
		return "", err
	}
	if model.IsAdapterDir(base) {
		return "", fmt.Errorf("base %s is a LoRA adapter, not a model", base)
	}
	if _, err := os.Stat(filepath.Join(base, "config.json")); err != nil {
		return "", fmt.Errorf("base %s is not a model directory: %w", base, err)
	}
	return base, nil
}

// loadSaved reads agent.json from metaDir and the tokenizer from tokDir;
// the weights are those of base, with adapter ("" for none) on them. Base
// and adapter are first checked against their checksums.json, when they
// have one (a directory hacrl wrote).
func loadSaved(metaDir, tokDir, base, adapter string, c TemplateChoice) (*Saved, error) {
	for _, dir := range []string{base, adapter} {
		if dir == "" {
			continue
		}
		if err := verifyDir(dir); err != nil {
			return nil, err
		}
	}
	meta, found, err := readMeta(metaDir)
	if err != nil {
		return nil, err
	}
	if !found && adapter != "" {
		meta.Name = filepath.Base(adapter)
	}
	if !found && metaDir != tokDir { // the default template is that of the tokenizer's files
		if meta.Template.Kind, err = DefaultTemplateKind(tokDir); err != nil {
			return nil, err
		}
	}
	s := &Saved{Dir: metaDir, Base: base, Adapter: adapter, Meta: meta, HasMeta: found, TokPath: filepath.Join(tokDir, "tokenizer.json")}
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
	m, err := model.Load(b, s.Base)
	if err != nil {
		return nil, err
	}
	if s.Adapter != "" {
		if err := m.LoadAdapters(s.Adapter); err != nil {
			return nil, err
		}
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
			TopP: smp.TopP, TopK: smp.TopK, MaxBatch: smp.MaxBatch, Stop: tmpl.StopTokens(s.Tok), Vocab: s.Tok.VocabSize()}}
	if len(a.Sampling.Stop) == 0 {
		return nil, fmt.Errorf("%s: tokenizer %s has no EOS token to end responses with", s.Dir, s.TokPath)
	}
	return a, nil
}

// adapterCarried are the files of a saved agent besides its weights that a
// merged checkpoint carries over: its tokenizer and prompt template
// (agent.json), from the adapter directory when it has them (a run's final
// agents do), else from the base.
var adapterCarried = []string{"tokenizer.json", tokenizer.ConfigFile, tokenizer.ChatTemplateFile, "special_tokens_map.json", "agent.json"}

// MergeAdapter writes into out (a new directory, written whole or not at
// all) the model of directory base with the LoRA adapter of directory
// adapter merged into its weights (model.MergeLoRA): a plain Hugging Face
// checkpoint, in dtype ("" keeps the base's: its config.json's
// torch_dtype), with the base's generation_config.json and the tokenizer
// and agent.json (see adapterCarried). base "" takes the adapter's
// base_model_name_or_path.
func MergeAdapter(b compute.Backend, base, adapter, out, dtype string) error {
	if _, err := os.Stat(out); err == nil {
		return fmt.Errorf("merge: %s exists; remove it or choose another --out", out)
	}
	if err := ModelDirError("adapter", adapter); err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	if !model.IsAdapterDir(adapter) {
		return fmt.Errorf("merge: %s is not a LoRA adapter: it has no %s", adapter, model.AdapterConfigFile)
	}
	base, err := AdapterBase(base, adapter)
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	for _, dir := range []string{base, adapter} {
		if err := verifyDir(dir); err != nil {
			return fmt.Errorf("merge: %w", err)
		}
	}
	m, err := model.Load(b, base)
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	if err := m.LoadAdapters(adapter); err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	if err := m.MergeLoRA(); err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	return atomicfile.WriteDir(out, withChecksums(func(tmp string) error {
		if err := m.SaveWith(tmp, model.SaveOptions{DType: dtype}); err != nil {
			return fmt.Errorf("merge: %w", err)
		}
		for _, name := range adapterCarried {
			for _, dir := range []string{adapter, base} {
				data, err := os.ReadFile(filepath.Join(dir, name))
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				if err != nil {
					return fmt.Errorf("merge: %w", err)
				}
				if err := os.WriteFile(filepath.Join(tmp, name), data, 0o644); err != nil {
					return fmt.Errorf("merge: %w", err)
				}
				break
			}
		}
		return nil
	}))
}
