package train

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"

	"github.com/gomlx/compute"
	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/internal/atomicfile"
	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/rolloutengine"
	"github.com/hacrl/hacrl/tokenizer"
)

// Agent is one participant of a run: its policy, the frozen reference copy for
// the KL term, its optimizer, tokenizer, prompt template and sampling settings.
type Agent struct {
	Index    int
	Name     string
	Model    *model.Model
	Ref      *model.Model // nil when the KL coefficient is 0
	Trainer  *model.Trainer
	Tok      tokenizer.Tokenizer
	Template tokenizer.Template
	Sampling model.SampleOptions
	Opt      config.Optimizer
	// Task is the generated task the agent trains on (nil for datasets),
	// recorded in agent.json so evaluation can find the held-out split.
	Task *config.Task
	// BaseDir is the checkpoint a LoRA agent's adapters belong to (an
	// absolute path; "" for an agent without adapters, or for a new model
	// whose base the run has not saved yet): base_model_name_or_path of
	// the adapter files it saves.
	BaseDir string

	// tokFiles are the tokenizer_config.json and chat_template.jinja found
	// beside the agent's tokenizer.json, by name, saved with the agent so
	// that a Hugging Face checkpoint keeps its special tokens and chat
	// template whatever template the agent prompted with.
	tokFiles map[string][]byte
	// rollout samples the agent's rollouts when not its own model
	// in-process (nil): a server's client (engines.go).
	rollout rolloutengine.Engine
	// pushAdapters: a LoRA agent whose server (hacrl serve, started on
	// BaseDir) loads adapter directories gets its adapters alone.
	pushAdapters bool
}

// Meta is agent.json, saved beside an agent's weights: how it prompts and
// samples, and the task it learned, so `hacrl eval` needs no other config.
type Meta struct {
	Name     string          `json:"name"`
	Template config.Template `json:"template"`
	Sampling config.Sampling `json:"sampling"`
	Task     *config.Task    `json:"task,omitempty"`
}

// ReadMeta reads dir/agent.json; a checkpoint without one (a Hugging Face
// model, say) gets default sampling and the template DefaultTemplateKind
// gives dir: its own chat template (kind hf) when it has one, else plain.
// A template kind other than plain, chat or hf is an error naming the file.
func ReadMeta(dir string) (Meta, error) {
	m, _, err := readMeta(dir)
	return m, err
}

// DefaultTemplateKind is the template kind of a checkpoint without
// agent.json whose tokenizer files are in tokDir: hf when they carry a chat
// template (a chat_template.jinja, or a tokenizer_config.json with a
// chat_template), as transformers' apply_chat_template and vLLM's chat
// endpoint prompt it; plain otherwise. A checkpoint with an agent.json
// prompts as it says; --template plain (template: {kind: plain} in a
// config) asks for plain prompts explicitly.
func DefaultTemplateKind(tokDir string) (string, error) {
	ok, err := tokenizer.HasChatTemplate(tokDir)
	if err != nil {
		return "", err
	}
	if ok {
		return tokenizer.KindHF, nil
	}
	return tokenizer.KindPlain, nil
}

// readMeta is ReadMeta that also reports whether dir has an agent.json.
func readMeta(dir string) (Meta, bool, error) {
	one := 1.0
	m := Meta{Name: filepath.Base(dir), Template: config.Template{Kind: tokenizer.KindPlain},
		Sampling: config.Sampling{Temperature: &one, TopP: 1, MaxNewTokens: 64}}
	path := filepath.Join(dir, "agent.json")
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		if m.Template.Kind, err = DefaultTemplateKind(dir); err != nil {
			return m, false, err
		}
		return m, false, nil
	}
	if err != nil {
		return m, false, err
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, true, fmt.Errorf("%s: %w", path, err)
	}
	switch m.Template.Kind {
	case "":
		m.Template.Kind = tokenizer.KindPlain
	case tokenizer.KindPlain, tokenizer.KindChat, tokenizer.KindHF:
	default:
		return m, true, fmt.Errorf("%s: template.kind must be plain, chat or hf, got %q", path, m.Template.Kind)
	}
	return m, true, nil
}

// AgentTemplate is the prompt template an agent uses: the config's when it
// names a kind; otherwise, for a checkpoint, the template saved in its
// agent.json (a system text in the config still replaces the saved one);
// for a checkpoint without agent.json, its own chat template (kind hf) when
// its tokenizer files carry one (see DefaultTemplateKind; tokPath is the
// agent's tokenizer.json, "" for the checkpoint's), else plain; and plain
// for a new model. A config kind or system text that differs from a
// checkpoint's saved one is honoured and described in note, for the log,
// as is a checkpoint's chat template taken by default; note is "" otherwise.
func AgentTemplate(t config.Template, checkpoint, tokPath string) (tmpl tokenizer.Template, note string, err error) {
	tmpl = tokenizer.Template{Kind: t.Kind, System: t.System, Vars: t.Vars}
	saved, found := Meta{}, false
	if checkpoint != "" {
		if saved, found, err = readMeta(checkpoint); err != nil {
			return tmpl, "", err
		}
	}
	switch {
	case !found:
		if tmpl.Kind != "" {
			return tmpl, "", nil
		}
		tmpl.Kind = tokenizer.KindPlain
		if checkpoint != "" {
			tokDir := checkpoint
			if tokPath != "" {
				tokDir = filepath.Dir(tokPath)
			}
			if tmpl.Kind, err = DefaultTemplateKind(tokDir); err != nil {
				return tmpl, "", err
			}
			if tmpl.Kind == tokenizer.KindHF {
				note = fmt.Sprintf("%s has no agent.json: prompting with the chat template of its tokenizer files (template kind hf; set template.kind plain for plain prompts)", checkpoint)
			}
		}
		return tmpl, note, nil
	case tmpl.Kind == "":
		tmpl.Kind = saved.Template.Kind
		if tmpl.System == "" {
			tmpl.System = saved.Template.System
		}
		if len(tmpl.Vars) == 0 {
			tmpl.Vars = saved.Template.Vars
		}
	}
	if tmpl.Kind != saved.Template.Kind || tmpl.System != saved.Template.System {
		desc := func(kind, system string) string {
			if system == "" {
				return "(kind " + kind + ")"
			}
			return fmt.Sprintf("(kind %s, system %q)", kind, system)
		}
		note = fmt.Sprintf("the config's template %s replaces the one saved in %s %s",
			desc(tmpl.Kind, tmpl.System), filepath.Join(checkpoint, "agent.json"), desc(saved.Template.Kind, saved.Template.System))
	}
	return tmpl, note, nil
}

// Stop returns the token the agent ends a response with (−1 if none).
func (a *Agent) Stop() int {
	if s := a.Template.StopTokens(a.Tok); len(s) > 0 {
		return s[0]
	}
	return -1
}

// MaxResponse is the longest response the agent samples or trains on.
func (a *Agent) MaxResponse() int { return a.Sampling.MaxNewTokens }

// loadAgent builds agent i from its config: a checkpoint directory or a new
// model, plus its tokenizer and template (see AgentTemplate; an hf template
// is compiled from the tokenizer_config.json beside the tokenizer); log receives
// notes for the user.
func loadAgent(b compute.Backend, i int, ac config.Agent, withRef bool, log func(string)) (*Agent, error) {
	return newAgent(b, i, ac, 0, withRef, log)
}

// hubID is the shape of a Hugging Face hub id: owner/name.
var hubID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// ModelDirError says what is wrong with dir, a model directory given as
// what (a config key with its line, such as cfg.Where("agents[0].checkpoint"),
// or a command's argument), when it is not a directory here; nil when it is.
// A path shaped like a Hugging Face hub id (Qwen/Qwen3-0.6B) also gets the
// word that hacrl downloads nothing, and how to make the directory. Every
// place that takes a model directory (configs, and the CHECKPOINT of eval,
// generate, score, prompt, serve, merge and bench serve through LoadSaved
// and AdapterBase) checks it with this before reading anything in it.
func ModelDirError(what, dir string) error {
	st, err := os.Stat(dir)
	if err == nil && st.IsDir() {
		return nil
	}
	want := "want a model directory: config.json, model.safetensors (or shards), tokenizer.json"
	if err == nil {
		return fmt.Errorf("%s: %s is a file; %s", what, dir, want)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%s: no directory %s (%s)%s", what, dir, want, hubHint(dir))
}

// hubHint is, for a path shaped like a Hugging Face hub id, the word that
// hacrl downloads nothing and how to make the directory; else "".
func hubHint(dir string) string {
	if !hubID.MatchString(dir) {
		return ""
	}
	return fmt.Sprintf("; if %s is a Hugging Face hub id: hacrl downloads nothing — fetch it on a machine with network (hf download %s --local-dir DIR; huggingface-cli in older huggingface_hub) and give DIR", dir, dir)
}

// newAgent is loadAgent for an agent whose LoRA adapters, if its config has
// a lora section, draw their initial A matrices with loraSeed.
func newAgent(b compute.Backend, i int, ac config.Agent, loraSeed int64, withRef bool, log func(string)) (*Agent, error) {
	config.FillDefaults(&ac) // a config built in code, not parsed
	a := &Agent{Index: i, Name: ac.Name, Opt: ac.Optimizer}
	tmpl, note, err := AgentTemplate(ac.Template, ac.Checkpoint, ac.Tokenizer)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", ac.Name, err)
	}
	if note != "" {
		log(fmt.Sprintf("agent %s: %s", ac.Name, note))
	}
	tokPath := tokenizerPath(ac)
	if ac.Checkpoint != "" {
		if model.IsAdapterDir(ac.Checkpoint) {
			return nil, fmt.Errorf("agent %s: checkpoint %s is a LoRA adapter (%s), not a model: merge it into its base first (hacrl merge)",
				ac.Name, ac.Checkpoint, model.AdapterConfigFile)
		}
		if err := verifyDir(ac.Checkpoint); err != nil {
			return nil, fmt.Errorf("agent %s: %w", ac.Name, err)
		}
		m, err := model.Load(b, ac.Checkpoint)
		if err != nil {
			return nil, fmt.Errorf("agent %s: %w", ac.Name, err)
		}
		a.Model = m
	}
	tok, err := tokenizer.Load(tokPath)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", ac.Name, err)
	}
	a.Tok = tok
	if a.tokFiles, err = readTemplateFiles(tokPath); err != nil {
		return nil, fmt.Errorf("agent %s: %w", ac.Name, err)
	}
	if ac.Model != nil {
		cfg := newModelConfig(ac.Model, tok)
		m, err := model.New(b, cfg, ac.Model.Seed)
		if err != nil {
			return nil, fmt.Errorf("agent %s: %w", ac.Name, err)
		}
		a.Model = m
	}
	if err := CheckVocab(tok, tokPath, a.Model); err != nil {
		return nil, fmt.Errorf("agent %s: %w", ac.Name, err)
	}
	if err := PrepareTemplate(&tmpl, tokPath, tok, a.Model); err != nil {
		return nil, fmt.Errorf("agent %s: %w", ac.Name, err)
	}
	a.Template = tmpl
	a.Sampling = model.SampleOptions{
		MaxNewTokens: ac.Sampling.MaxNewTokens,
		Temperature:  *ac.Sampling.Temperature,
		TopP:         ac.Sampling.TopP,
		TopK:         ac.Sampling.TopK,
		MaxBatch:     ac.Sampling.MaxBatch,
		Stop:         a.Template.StopTokens(tok),
		Vocab:        tok.VocabSize(),
	}
	if len(a.Sampling.Stop) == 0 {
		return nil, fmt.Errorf("agent %s: tokenizer %s has no EOS token to end responses with", ac.Name, tokPath)
	}
	if ac.LoRA != nil {
		if err := a.addLoRA(ac, loraSeed); err != nil {
			return nil, err
		}
	}
	if withRef {
		ref, err := a.Model.Clone()
		if err != nil {
			return nil, fmt.Errorf("agent %s: reference copy: %w", ac.Name, err)
		}
		a.Ref = ref
	}
	tr, err := model.NewTrainer(a.Model, optimizerConfig(ac.Optimizer))
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", ac.Name, err)
	}
	a.Trainer = tr
	return a, nil
}

// addLoRA gives the agent fresh adapters of its config's lora section, A
// drawn with seed; its trainer, made after, updates them only.
func (a *Agent) addLoRA(ac config.Agent, seed int64) error {
	if err := a.Model.AddLoRA(loraConfig(ac.LoRA), seed); err != nil {
		return fmt.Errorf("agent %s: lora: %w", ac.Name, err)
	}
	if ac.Checkpoint != "" {
		abs, err := filepath.Abs(ac.Checkpoint)
		if err != nil {
			return fmt.Errorf("agent %s: %w", ac.Name, err)
		}
		a.BaseDir = abs
	}
	return nil
}

// loraConfig is the engine's form of a config's lora section (defaults
// applied).
func loraConfig(l *config.LoRA) model.LoRA {
	return model.LoRA{Rank: l.Rank, Alpha: l.Alpha, Targets: slices.Clone(l.TargetModules), RSLoRA: l.UseRSLoRA}
}

// isLoRA reports whether the agent trains LoRA adapters.
func (a *Agent) isLoRA() bool {
	_, ok := a.Model.LoRA()
	return ok
}

// CheckVocab reports a tokenizer with more tokens than the model has
// embedding rows. Fewer is a padded vocabulary, as Hugging Face checkpoints
// have (Qwen2.5: 151936 rows, about 151665 tokens): the extra rows are
// padding that sampling never picks (model.SampleOptions.Vocab).
func CheckVocab(tok tokenizer.Tokenizer, tokPath string, m *model.Model) error {
	if v, mv := tok.VocabSize(), m.Config().Vocab; v > mv {
		return fmt.Errorf("tokenizer %s has %d tokens but the model's vocabulary is %d", tokPath, v, mv)
	}
	return nil
}

// optimizerConfig is the engine's optimizer for o; unset fields (in a
// config built in code) take the config's defaults.
func optimizerConfig(o config.Optimizer) model.OptimizerConfig {
	config.FillDefaults(&o)
	return model.OptimizerConfig{
		LearningRate: o.LR,
		WeightDecay:  *o.WeightDecay,
		Beta1:        o.Beta1,
		Beta2:        o.Beta2,
		Epsilon:      o.Epsilon,
		MaxGradNorm:  *o.MaxGradNorm,
	}
}

// newModelConfig turns a config's new-model section into an engine config,
// taking the vocabulary and special tokens from the tokenizer.
func newModelConfig(m *config.NewModel, tok tokenizer.Tokenizer) model.Config {
	sp := tok.Special()
	return model.Config{
		Family:        m.Family,
		Vocab:         tok.VocabSize(),
		Dim:           m.Dim,
		Layers:        m.Layers,
		Heads:         m.Heads,
		KVHeads:       m.KVHeads,
		Hidden:        m.Hidden,
		MaxSeq:        m.MaxSeq,
		Activation:    m.Activation,
		TieEmbeddings: m.TieEmbeddings,
		BOS:           sp.BOS,
		EOS:           sp.EOS,
		ModelType:     m.ModelType,
		HeadSize:      m.HeadDim,
		RopeTheta:     m.RopeTheta,
		RopeScaling:   ropeScaling(m.RopeScaling),
	}
}

// ropeScaling is the engine's form of a config's rope_scaling; nil for none.
func ropeScaling(s *config.RopeScaling) *model.RopeScaling {
	if s == nil {
		return nil
	}
	return &model.RopeScaling{Type: s.RopeType, Factor: s.Factor, LowFreqFactor: s.LowFreqFactor,
		HighFreqFactor: s.HighFreqFactor, OriginalMaxPos: s.OriginalMaxPositionEmbeddings}
}

// saveAgent writes the agent's model, tokenizer and optimizer state into dir
// (which the caller renames into place). A LoRA agent's model is its
// adapters (Model.SaveAdapters), and its optimizer state theirs.
func saveAgent(a *Agent, dir string, exact bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	save := func() error { return a.Model.SaveWith(dir, model.SaveOptions{Exact: exact}) }
	if a.isLoRA() { // the adapters alone, in PEFT's layout: the base is a.BaseDir
		save = func() error { return a.Model.SaveAdapters(dir, a.BaseDir) }
	}
	if err := save(); err != nil {
		return fmt.Errorf("agent %s: %w", a.Name, err)
	}
	if err := a.Tok.Save(filepath.Join(dir, "tokenizer.json")); err != nil {
		return fmt.Errorf("agent %s: %w", a.Name, err)
	}
	if err := a.Trainer.SaveState(dir); err != nil {
		return fmt.Errorf("agent %s: %w", a.Name, err)
	}
	temp := a.Sampling.Temperature
	if err := saveTemplateFiles(a, dir); err != nil {
		return fmt.Errorf("agent %s: %w", a.Name, err)
	}
	meta := Meta{Name: a.Name, Template: config.Template{Kind: a.Template.Kind, System: a.Template.System, Vars: a.Template.Vars}, Task: a.Task,
		Sampling: config.Sampling{Temperature: &temp, TopP: a.Sampling.TopP, TopK: a.Sampling.TopK, MaxNewTokens: a.Sampling.MaxNewTokens,
			MaxBatch: a.Sampling.MaxBatch}}
	return writeJSON(filepath.Join(dir, "agent.json"), meta)
}

// PrepareTemplate readies an agent's template for its tokenizer (tokPath is
// its tokenizer.json) and model: an hf template is compiled from the
// tokenizer_config.json beside it and checked on a probe prompt, and the
// stop tokens gain the end tokens the model's generation_config.json
// declares (eos_token_id, one id or a list, as Llama 3's Instruct models
// list both <|end_of_text|> and <|eot_id|>). An end token the tokenizer
// does not have is an error: sampling could never stop on it.
func PrepareTemplate(tmpl *tokenizer.Template, tokPath string, tok tokenizer.Tokenizer, m *model.Model) error {
	if err := tmpl.LoadChat(tokPath, tok); err != nil {
		return err
	}
	return addGenerationStops(tmpl, tokPath, tok, m)
}

// addGenerationStops adds the end tokens of m's generation_config.json to
// tmpl's stop tokens (nothing when m is nil or has none).
func addGenerationStops(tmpl *tokenizer.Template, tokPath string, tok tokenizer.Tokenizer, m *model.Model) error {
	if m == nil {
		return nil
	}
	gen, ok := m.GenerationConfig()
	if !ok {
		return nil
	}
	tmpl.ExtraStops = slices.Clone(tmpl.ExtraStops)
	for _, id := range gen.EOSTokenIDs {
		if id < 0 || id >= tok.VocabSize() {
			return fmt.Errorf("generation_config.json: eos_token_id %d is not a token of %s (%d tokens)", id, tokPath, tok.VocabSize())
		}
		if !slices.Contains(tmpl.ExtraStops, id) {
			tmpl.ExtraStops = append(tmpl.ExtraStops, id)
		}
	}
	return nil
}

// saveTemplateFiles writes what an agent's template needs beside its saved
// tokenizer: for an hf template, the tokenizer_config.json (and any
// chat_template.jinja) it came from; otherwise those found beside the
// agent's tokenizer.json. A tokenizer that came without a
// tokenizer_config.json (hacrl's own, as the shipped agents') gets
// plainTokenizerConfig.
func saveTemplateFiles(a *Agent, dir string) error {
	files := a.tokFiles
	if a.Template.Kind == tokenizer.KindHF && a.Template.Chat != nil {
		if files = a.Template.Chat.Files(); files == nil {
			return fmt.Errorf("the chat template from %s has no tokenizer_config.json to save", a.Template.Chat.Source())
		}
	}
	if _, ok := files[tokenizer.ConfigFile]; !ok {
		files = maps.Clone(files)
		if files == nil {
			files = map[string][]byte{}
		}
		files[tokenizer.ConfigFile] = plainTokenizerConfig
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := atomicfile.WriteFile(filepath.Join(dir, name), files[name]); err != nil {
			return err
		}
	}
	return nil
}

// plainTokenizerConfig is the tokenizer_config.json saved beside a
// tokenizer.json that came without one. Without it transformers'
// AutoTokenizer picks the tokenizer class of config.json's model_type —
// GPT2Tokenizer for gpt2, which puts its byte-level pre-tokenizer in front
// of the vocabulary, so that a character-level tokenizer.json loses every
// space — where PreTrainedTokenizerFast takes tokenizer.json as it is, as
// hacrl does.
var plainTokenizerConfig = []byte(`{"tokenizer_class": "PreTrainedTokenizerFast"}` + "\n")

// tokenizerPath is the tokenizer file of agent ac: its tokenizer, else its
// checkpoint's tokenizer.json ("" when it names neither).
func tokenizerPath(ac config.Agent) string {
	if ac.Tokenizer == "" && ac.Checkpoint != "" {
		return filepath.Join(ac.Checkpoint, "tokenizer.json")
	}
	return ac.Tokenizer
}

// readTemplateFiles returns the tokenizer_config.json and chat_template.jinja
// beside the tokenizer.json at tokPath that exist (see
// tokenizer.TemplateFiles), or nil when tokPath is "".
func readTemplateFiles(tokPath string) (map[string][]byte, error) {
	if tokPath == "" {
		return nil, nil
	}
	return tokenizer.TemplateFiles(filepath.Dir(tokPath))
}
