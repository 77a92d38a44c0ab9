package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"

	"go.yaml.in/yaml/v3"
)

// SFT is a supervised warm-start run (`hacrl sft`): one agent learns the worked
// solutions of a task (or the answers of a JSONL dataset) by cross-entropy on
// the response tokens, and is saved as a checkpoint directory that `train`
// configs name as an agent's checkpoint.
type SFT struct {
	Out        string       `yaml:"out"`  // checkpoint directory written at the end
	Seed       int64        `yaml:"seed"` // data order and, for a new model, initial weights
	Checkpoint string       `yaml:"checkpoint"`
	Model      *NewModel    `yaml:"model"`
	Tokenizer  SFTTokenizer `yaml:"tokenizer"`
	Template   Template     `yaml:"template"`
	Task       *Task        `yaml:"task"`
	Dataset    *Dataset     `yaml:"dataset"`
	Examples   int          `yaml:"examples"` // distinct training problems (generated tasks); 0 = all of a dataset
	Steps      int          `yaml:"steps"`
	BatchSize  int          `yaml:"batch_size"`
	Optimizer  Optimizer    `yaml:"optimizer"`
	Eval       SFTEval      `yaml:"eval"`
	Backend    string       `yaml:"backend"`
	Engine     string       `yaml:"engine"` // auto (default), native or graph
}

// SFTTokenizer says where the agent's tokenizer comes from: a file, or built
// from the training texts (char: their alphabet; bpe: a byte-level BPE of
// vocab_size tokens).
type SFTTokenizer struct {
	Path      string `yaml:"path"`
	Kind      string `yaml:"kind"` // char or bpe (when no path)
	VocabSize int    `yaml:"vocab_size"`
}

// SFTEval measures greedy accuracy on the test split during warm start.
type SFTEval struct {
	Every        int `yaml:"every"`
	Problems     int `yaml:"problems"`
	MaxNewTokens int `yaml:"max_new_tokens"`
}

// LoadSFT reads and checks an SFT config file.
func LoadSFT(path string) (*SFT, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var root yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&root); err != nil {
		return nil, fmt.Errorf("config %s: not valid YAML: %w", path, err)
	}
	if err := checkKeys(&root, reflect.TypeOf(SFT{}), ""); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	var s SFT
	if err := root.Decode(&s); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	s.applyDefaults()
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return &s, nil
}

func (s *SFT) applyDefaults() {
	if s.Engine == "" {
		s.Engine = "auto"
	}
	if s.Template.Kind == "" {
		s.Template.Kind = "plain"
	}
	if s.BatchSize == 0 {
		s.BatchSize = 32
	}
	if s.Eval.Problems == 0 {
		s.Eval.Problems = 200
	}
	if s.Eval.MaxNewTokens == 0 {
		s.Eval.MaxNewTokens = 64
	}
	a := Agent{Optimizer: s.Optimizer, Model: s.Model, Template: s.Template, Sampling: Sampling{MaxNewTokens: 1}}
	c := Config{Agents: []Agent{a}}
	c.applyDefaults()
	s.Optimizer = c.Agents[0].Optimizer
	s.Model = c.Agents[0].Model
}

// Validate reports impossible settings by key path.
func (s *SFT) Validate() error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{path}, args...)...))
	}
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
	if s.Steps <= 0 {
		bad("steps", "must be > 0, got %d", s.Steps)
	}
	if s.BatchSize <= 0 {
		bad("batch_size", "must be > 0, got %d", s.BatchSize)
	}
	if s.Examples < 0 {
		bad("examples", "must be >= 0, got %d", s.Examples)
	}
	if s.Task != nil && s.Examples == 0 {
		bad("examples", "required for a generated task (how many distinct training problems)")
	}
	validateOptimizer("optimizer", s.Optimizer, bad)
	if s.Template.Kind != "plain" && s.Template.Kind != "chat" {
		bad("template.kind", "must be plain or chat, got %q", s.Template.Kind)
	}
	if s.Model != nil {
		validateModel("model", s.Model, bad)
	}
	return errors.Join(errs...)
}
