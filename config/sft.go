package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
)

// SFT is a supervised warm-start run (`hacrl sft`): one agent learns the worked
// solutions of a task (or the answers of a JSONL dataset) by cross-entropy on
// the response tokens, and is saved as a checkpoint directory that `train`
// configs name as an agent's checkpoint.
type SFT struct {
	// Out is the checkpoint directory written at the end (required).
	Out string `yaml:"out,omitempty"`
	// Seed draws the data order and, for a new model, the initial weights.
	Seed int64 `yaml:"seed,omitempty"`
	// Checkpoint is a directory of a model to go on training; give exactly one
	// of checkpoint or model.
	Checkpoint string `yaml:"checkpoint,omitempty"`
	// Model is a freshly initialised model.
	Model *NewModel `yaml:"model,omitempty"`
	// Tokenizer says where the agent's tokenizer comes from (with a new model).
	Tokenizer SFTTokenizer `yaml:"tokenizer,omitempty"`
	// Template is the prompt template the agent learns with (and is saved
	// with); its kind defaults as in a train config's agent.
	Template Template `yaml:"template,omitempty"`
	// Task is a generated task whose worked solutions are learned; give
	// exactly one of task or dataset.
	Task *Task `yaml:"task,omitempty"`
	// Dataset is a JSONL or Parquet file whose solutions (or answers) are
	// learned.
	Dataset *Dataset `yaml:"dataset,omitempty"`
	// Examples is the number of distinct training problems: required for a
	// generated task; 0 takes all of a dataset.
	Examples int `yaml:"examples,omitempty"`
	// Steps is the number of optimizer steps (> 0).
	Steps int `yaml:"steps,omitempty"`
	// BatchSize is the number of sequences per optimizer step.
	BatchSize int `yaml:"batch_size,omitempty" default:"32"`
	// Optimizer is the AdamW optimizer and learning-rate schedule.
	Optimizer Optimizer `yaml:"optimizer,omitempty"`
	// Eval is the held-out greedy evaluation during the warm start.
	Eval SFTEval `yaml:"eval,omitempty"`
	// Backend is the GoMLX backend configuration, as in a train config.
	Backend string `yaml:"backend,omitempty" derived:"the backend package's default (see below)"`
	// Engine is how the model runs: auto, native or graph, as in a train
	// config.
	Engine string `yaml:"engine,omitempty" default:"auto"`

	src *source // where the values came from
}

// SFTTokenizer says where the agent's tokenizer comes from: a file, or built
// from the training texts (char: their alphabet; bpe: a byte-level BPE of
// vocab_size tokens).
type SFTTokenizer struct {
	// Path is a tokenizer.json file to use as it is.
	Path string `yaml:"path,omitempty"`
	// Kind builds a tokenizer from the training texts when there is no path:
	// char (their alphabet) or bpe (a byte-level BPE).
	Kind string `yaml:"kind,omitempty"`
	// VocabSize is the size of a bpe tokenizer (≥ 257: the 256 bytes and the
	// special tokens).
	VocabSize int `yaml:"vocab_size,omitempty"`
}

// SFTEval measures greedy accuracy on the test split during warm start.
type SFTEval struct {
	// Every is the number of steps between evaluations; 0 evaluates only
	// after the last step.
	Every int `yaml:"every,omitempty"`
	// Problems is the number of test problems evaluated.
	Problems int `yaml:"problems,omitempty" default:"200"`
	// MaxNewTokens is the longest response in tokens.
	MaxNewTokens int `yaml:"max_new_tokens,omitempty" default:"64"`
}

// LoadSFT reads and checks an SFT config file.
func LoadSFT(path string, sets ...Set) (*SFT, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	s, err := ParseSFT(data, sets...)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return s, nil
}

// ParseSFT decodes an SFT config strictly, applies defaults and validates,
// as Parse does a run's.
func ParseSFT(data []byte, sets ...Set) (*SFT, error) {
	var s SFT
	src, err := decodeStrict(data, &s, sets)
	if err != nil {
		return nil, err
	}
	s.src = src
	s.applyDefaults()
	if err := s.validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

func (s *SFT) applyDefaults() {
	fillDefaults(reflect.ValueOf(s).Elem())
	// A checkpoint keeps an empty kind: its template (sft resolves it).
	if s.Template.Kind == "" && s.Model != nil {
		s.Template.Kind = "plain"
	}
	if s.Model != nil {
		s.Model.applyDefaults()
	}
}

// Where names the key at path for a message about its value, as
// Config.Where does.
func (s *SFT) Where(path string) string { return s.src.where(path) }

// Validate reports impossible settings by key path.
func (s *SFT) Validate() error { return s.validate() }

func (s *SFT) validate() error {
	var errs []error
	bad := collector(&errs, s.src)
	if s.Out == "" {
		bad("out", "required (the checkpoint directory to write)")
	}
	checkEngine(bad, s.Engine)
	if (s.Checkpoint == "") == (s.Model == nil) {
		bad("model", "give exactly one of checkpoint or model")
	}
	if (s.Task == nil) == (s.Dataset == nil) {
		bad("task", "give exactly one of task or dataset")
	}
	if s.Task != nil {
		validateTask("task", s.Task, bad)
	}
	if s.Dataset != nil && s.Dataset.Path == "" {
		bad("dataset.path", "required (a .jsonl or .parquet file)")
	}
	if s.Dataset != nil {
		checkTooLong(bad, s.Dataset.TooLong)
	}
	if s.Checkpoint == "" && s.Tokenizer.Path == "" {
		switch s.Tokenizer.Kind {
		case "char":
		case "bpe":
			if s.Tokenizer.VocabSize < 257 {
				bad("tokenizer.vocab_size", "a byte-level BPE needs at least 257 tokens (256 bytes + specials), got %d", s.Tokenizer.VocabSize)
			}
		default:
			bad("tokenizer", "give path, or kind char or bpe, got kind %q", s.Tokenizer.Kind)
		}
	}
	positive(bad, s.src, "steps", s.Steps, "the number of optimizer steps")
	if s.BatchSize <= 0 {
		bad("batch_size", "must be > 0, got %d", s.BatchSize)
	}
	if s.Eval.Every < 0 {
		bad("eval.every", "must be >= 0 (0 = only at the end), got %d", s.Eval.Every)
	}
	if s.Eval.Problems <= 0 {
		bad("eval.problems", "must be > 0, got %d", s.Eval.Problems)
	}
	if s.Eval.MaxNewTokens <= 0 {
		bad("eval.max_new_tokens", "must be > 0, got %d", s.Eval.MaxNewTokens)
	}
	if s.Examples < 0 {
		bad("examples", "must be >= 0, got %d", s.Examples)
	}
	if s.Task != nil && s.Examples == 0 {
		bad("examples", "required for a generated task (how many distinct training problems)")
	}
	validateOptimizer("optimizer", s.Optimizer, bad, s.src)
	validateTemplate("template", s.Template, s.Model != nil, bad)
	if s.Model != nil {
		validateModel("model", s.Model, bad, s.src)
	}
	return errors.Join(errs...)
}
