// Package config is the schema of a hacrl run: the agents, the method and its
// hyperparameters, the task or dataset, the batch sizes, the schedule of
// evaluation and checkpoints. Files are YAML. Decoding is strict: an unknown
// key, a value of the wrong type or an impossible combination fails before any
// work starts, with the key's path (agents[1].sampling.top_p) and line.
//
// Batch sizes have explicit names, because "batch size" means four different
// things in RL trainers:
//
//	prompts_per_step      prompts drawn each step (B)
//	responses_per_prompt  responses each agent samples per prompt (G)
//	mini_batch            sequences per optimizer update (one AdamW step)
//	micro_batch           sequences per forward/backward pass (gradient accumulation)
//
// Each learner trains every step on all n·B·G pooled sequences (its own and
// the other agents'), self samples first, so it takes ceil(n·B·G / mini_batch)
// updates per step; the derived plan is printed at start (see Plan).
package config

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config is a whole run.
type Config struct {
	Name        string     `yaml:"name" json:"name,omitempty"`
	Seed        int64      `yaml:"seed" json:"seed,omitempty"`
	Out         string     `yaml:"out" json:"out,omitempty"`
	Steps       int        `yaml:"steps" json:"steps,omitempty"`
	Method      Method     `yaml:"method" json:"method,omitempty"`
	Task        *Task      `yaml:"task" json:"task,omitempty"`
	Dataset     *Dataset   `yaml:"dataset" json:"dataset,omitempty"`
	Reward      *Reward    `yaml:"reward" json:"reward,omitempty"` // an external reward (a command or an HTTP endpoint) in place of the task's own checker; docs/reward.md
	Batch       Batch      `yaml:"batch" json:"batch,omitempty"`
	Agents      []Agent    `yaml:"agents" json:"agents,omitempty"`
	Eval        Eval       `yaml:"eval" json:"eval,omitempty"`
	Checkpoint  Checkpoint `yaml:"checkpoint" json:"checkpoint,omitempty"`
	Rollouts    Rollouts   `yaml:"rollouts" json:"rollouts,omitempty"`           // readable rollout logs in OUT/rollouts (off by default)
	OnNonFinite string     `yaml:"on_non_finite" json:"on_non_finite,omitempty"` // "skip" (default): drop the mini-batch; "stop": end the run
	Backend     string     `yaml:"backend" json:"backend,omitempty"`             // GoMLX backend config; default "go:parallelism=-1"
	Engine      string     `yaml:"engine" json:"engine,omitempty"`               // auto (default), native or graph: how the models run (model.Engine)
}

// checkEngine reports an engine name other than auto, native or graph.
func checkEngine(bad func(path, format string, args ...any), engine string) {
	switch engine {
	case "auto", "native", "graph":
	default:
		bad("engine", "must be auto, native or graph, got %q", engine)
	}
}

// Method selects the algorithm preset and overrides its hyperparameters.
// Unset fields keep the preset's values (../shared/docs/hacpo-paper.md §4.3).
type Method struct {
	Name         string   `yaml:"name" json:"name,omitempty"` // hacpo, gspo, gspo2x, grpo, naive, no-adv, no-omega, no-stepwise, no-cross-clip
	Alpha        *float64 `yaml:"alpha" json:"alpha,omitempty"`
	Delta        *float64 `yaml:"delta" json:"delta,omitempty"`           // cross clip lower bound is 1 − delta
	DeltaStep    *float64 `yaml:"delta_step" json:"delta_step,omitempty"` // per-update tightening of the cross lower bound
	ClipLow      *float64 `yaml:"clip_low" json:"clip_low,omitempty"`
	ClipHigh     *float64 `yaml:"clip_high" json:"clip_high,omitempty"`
	KLCoef       *float64 `yaml:"kl_coef" json:"kl_coef,omitempty"`
	Window       *int     `yaml:"window" json:"window,omitempty"`               // capability window K
	WarmupSteps  *int     `yaml:"warmup_steps" json:"warmup_steps,omitempty"`   // steps with ω forced to 1
	Capability   string   `yaml:"capability" json:"capability,omitempty"`       // "accuracy" (fraction of rewards > 0) or "mean_reward"
	NormalizeStd *bool    `yaml:"normalize_std" json:"normalize_std,omitempty"` // divide advantages by the joint std
	OmegaMin     *float64 `yaml:"omega_min" json:"omega_min,omitempty"`
	OmegaMax     *float64 `yaml:"omega_max" json:"omega_max,omitempty"`
	// CrossAdvantage is "all" (the paper) or "positive": a diagnostic beyond the
	// paper in which other agents' samples with a negative advantage contribute
	// nothing to the learner's update (see hacpo.Settings.CrossPositiveOnly).
	CrossAdvantage string `yaml:"cross_advantage" json:"cross_advantage,omitempty"`
}

// Task names a generated task and its options; zero options take the task's
// defaults, and the task itself checks their ranges.
type Task struct {
	Name         string  `yaml:"name" json:"name,omitempty"` // arith or countdown
	Seed         uint64  `yaml:"seed" json:"seed,omitempty"` // selects the problems; independent of the run's seed so every seed sees the same test set
	FormatWeight float64 `yaml:"format_weight" json:"format_weight,omitempty"`
	// arith
	Digits    int    `yaml:"digits" json:"digits,omitempty"`
	Ops       int    `yaml:"ops" json:"ops,omitempty"`
	Operators string `yaml:"operators" json:"operators,omitempty"`
	MulDigits int    `yaml:"mul_digits" json:"mul_digits,omitempty"`
	// countdown
	Numbers   int  `yaml:"numbers" json:"numbers,omitempty"`
	MaxNumber int  `yaml:"max_number" json:"max_number,omitempty"`
	MaxTarget int  `yaml:"max_target" json:"max_target,omitempty"`
	Fractions bool `yaml:"fractions" json:"fractions,omitempty"`
}

// Dataset is a training prompt set read from a JSONL or Parquet file (by its
// extension; verl's parquet layout is understood), or a data set of the shared
// data directory by name (path: math_train, gsm8k, ...; its fields are
// fixed). Answers are checked with the math verifier.
type Dataset struct {
	Path          string `yaml:"path" json:"path,omitempty"`
	QuestionField string `yaml:"question_field" json:"question_field,omitempty"` // dotted path; "a|b" takes the first present
	AnswerField   string `yaml:"answer_field" json:"answer_field,omitempty"`
	SolutionField string `yaml:"solution_field" json:"solution_field,omitempty"` // worked solutions, for SFT
	IDField       string `yaml:"id_field" json:"id_field,omitempty"`
	PromptSuffix  string `yaml:"prompt_suffix" json:"prompt_suffix,omitempty"` // appended to every question (e.g. the paper's \boxed{} instruction)
	// TooLong says what happens to training problems whose prompt, with an
	// agent's template and tokenizer, leaves no room for that agent's
	// sampling.max_new_tokens within its model's max_seq. They are all
	// found before the first step. "error" (the default) stops the run
	// with their count per agent and the first few problem ids; "drop"
	// leaves every problem too long for any agent out of all agents'
	// training sets and logs how many.
	TooLong string `yaml:"too_long" json:"too_long,omitempty"`
}

// Reward names an external reward, which scores every response of a
// training step in place of the task's own checker. The protocol (one JSON
// request per batch, one JSON answer) is in docs/reward.md.
type Reward struct {
	// Command is the argv of a long-lived process that reads requests on
	// its stdin and writes answers on its stdout, one JSON line each, e.g.
	// [python3, examples/reward/python/reward.py]. Relative paths resolve
	// from hacrl's working directory, like every other path in a config;
	// a bare program name is looked up in PATH. Give command or url.
	Command []string `yaml:"command" json:"command,omitempty"`
	// URL is an HTTP endpoint that answers each request POSTed to it as a
	// JSON body, e.g. http://127.0.0.1:8000/reward. Give command or url.
	URL string `yaml:"url" json:"url,omitempty"`
	// TokenEnv names an environment variable holding a bearer token sent
	// as "Authorization: Bearer …" with every HTTP request (url only); the
	// token itself never goes in the config.
	TokenEnv string `yaml:"token_env" json:"token_env,omitempty"`
	// Timeout bounds each request, as a Go duration ("30s", "2m"); default
	// "60s". A command that does not answer in time is killed and the run
	// stops with an error.
	Timeout string `yaml:"timeout" json:"timeout,omitempty"`
	// StartTimeout bounds the start: launching the command and its answer
	// to the first, empty request (time to load a model, say); default "2m".
	StartTimeout string `yaml:"start_timeout" json:"start_timeout,omitempty"`
	// BatchSize is the most responses per request; 0 (default) sends all
	// of a step's responses, every agent's, in one request.
	BatchSize int `yaml:"batch_size" json:"batch_size,omitempty"`
	// Eval also scores the evaluation sets of the task's splits and of
	// dataset files with this reward (correct = the answer's "correct",
	// else reward >= 1); default false: evaluation keeps the task's own
	// checker. Benchmark sets always keep the math verifier.
	Eval bool `yaml:"eval" json:"eval,omitempty"`
}

// Defaults of reward.timeout and reward.start_timeout.
const (
	DefaultRewardTimeout      = "60s"
	DefaultRewardStartTimeout = "2m"
)

// Timeouts are the parsed timeout and start_timeout of a validated config.
func (r *Reward) Timeouts() (timeout, start time.Duration) {
	timeout, _ = time.ParseDuration(r.Timeout)
	start, _ = time.ParseDuration(r.StartTimeout)
	return timeout, start
}

// validateReward checks the reward section (defaults applied).
func validateReward(r *Reward, bad func(path, format string, args ...any)) {
	if (len(r.Command) == 0) == (r.URL == "") {
		bad("reward", "give exactly one of command (an argv list) or url")
	}
	if len(r.Command) > 0 && r.Command[0] == "" {
		bad("reward.command[0]", "must name a program, got an empty string")
	}
	if r.URL != "" {
		u, err := url.Parse(r.URL)
		switch {
		case err != nil:
			bad("reward.url", "not a URL: %v", err)
		case u.Scheme != "http" && u.Scheme != "https":
			bad("reward.url", "must start with http:// or https://, got %q", r.URL)
		case u.Host == "":
			bad("reward.url", "has no host: %q", r.URL)
		}
	}
	if r.TokenEnv != "" {
		if r.URL == "" {
			bad("reward.token_env", "only with url (a command inherits hacrl's environment)")
		}
		if !envName.MatchString(r.TokenEnv) {
			bad("reward.token_env", "must be the name of an environment variable (letters, digits, _), got %q", r.TokenEnv)
		}
	}
	for _, d := range []struct{ key, v string }{{"reward.timeout", r.Timeout}, {"reward.start_timeout", r.StartTimeout}} {
		if t, err := time.ParseDuration(d.v); err != nil {
			bad(d.key, "must be a duration like 30s or 2m, got %q", d.v)
		} else if t <= 0 {
			bad(d.key, "must be > 0, got %q", d.v)
		}
	}
	if r.BatchSize < 0 {
		bad("reward.batch_size", "must be >= 0 (0 = a whole step per request), got %d", r.BatchSize)
	}
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Batch holds the four batch sizes (see the package doc).
type Batch struct {
	PromptsPerStep     int `yaml:"prompts_per_step" json:"prompts_per_step,omitempty"`
	ResponsesPerPrompt int `yaml:"responses_per_prompt" json:"responses_per_prompt,omitempty"`
	MiniBatch          int `yaml:"mini_batch" json:"mini_batch,omitempty"`
	MicroBatch         int `yaml:"micro_batch" json:"micro_batch,omitempty"`
}

// Agent is one participant: a model (new or from a checkpoint), its tokenizer
// and prompt template, its optimizer and its sampling settings.
type Agent struct {
	Name       string    `yaml:"name" json:"name,omitempty"`
	Checkpoint string    `yaml:"checkpoint" json:"checkpoint,omitempty"` // directory with config.json, model.safetensors, tokenizer.json
	Model      *NewModel `yaml:"model" json:"model,omitempty"`           // a new model instead of a checkpoint
	Tokenizer  string    `yaml:"tokenizer" json:"tokenizer,omitempty"`   // tokenizer.json; defaults to the checkpoint's
	Template   Template  `yaml:"template" json:"template,omitempty"`
	Optimizer  Optimizer `yaml:"optimizer" json:"optimizer,omitempty"`
	Sampling   Sampling  `yaml:"sampling" json:"sampling,omitempty"`
}

// NewModel describes a freshly initialised model.
type NewModel struct {
	Family        string `yaml:"family" json:"family,omitempty"` // gpt or llama
	Dim           int    `yaml:"dim" json:"dim,omitempty"`
	Layers        int    `yaml:"layers" json:"layers,omitempty"`
	Heads         int    `yaml:"heads" json:"heads,omitempty"`
	KVHeads       int    `yaml:"kv_heads" json:"kv_heads,omitempty"`
	Hidden        int    `yaml:"hidden" json:"hidden,omitempty"`
	MaxSeq        int    `yaml:"max_seq" json:"max_seq,omitempty"`
	Activation    string `yaml:"activation" json:"activation,omitempty"`
	TieEmbeddings bool   `yaml:"tie_embeddings" json:"tie_embeddings,omitempty"`
	Seed          int64  `yaml:"seed" json:"seed,omitempty"`
}

// Template is the prompt template: "plain" or "chat".
type Template struct {
	Kind   string `yaml:"kind" json:"kind,omitempty"`
	System string `yaml:"system" json:"system,omitempty"`
}

// Optimizer is AdamW with a learning-rate schedule.
type Optimizer struct {
	LR          float64  `yaml:"lr" json:"lr,omitempty"`
	WeightDecay *float64 `yaml:"weight_decay" json:"weight_decay,omitempty"`
	Beta1       float64  `yaml:"beta1" json:"beta1,omitempty"`
	Beta2       float64  `yaml:"beta2" json:"beta2,omitempty"`
	Epsilon     float64  `yaml:"epsilon" json:"epsilon,omitempty"`
	MaxGradNorm float64  `yaml:"max_grad_norm" json:"max_grad_norm,omitempty"`
	Schedule    string   `yaml:"schedule" json:"schedule,omitempty"` // constant, linear, cosine
	WarmupSteps int      `yaml:"warmup_steps" json:"warmup_steps,omitempty"`
	MinLRRatio  float64  `yaml:"min_lr_ratio" json:"min_lr_ratio,omitempty"`
}

// Sampling are the rollout sampling settings.
type Sampling struct {
	Temperature  float64 `yaml:"temperature" json:"temperature,omitempty"`
	TopP         float64 `yaml:"top_p" json:"top_p,omitempty"`
	TopK         int     `yaml:"top_k" json:"top_k,omitempty"`
	MaxNewTokens int     `yaml:"max_new_tokens" json:"max_new_tokens,omitempty"`
}

// Eval is the evaluation schedule.
type Eval struct {
	Every   int       `yaml:"every" json:"every,omitempty"`       // steps between evaluations; 0 = only at start and end
	AtStart *bool     `yaml:"at_start" json:"at_start,omitempty"` // evaluate the initial agents (default true)
	Sets    []EvalSet `yaml:"sets" json:"sets,omitempty"`
}

// EvalSet is one evaluation set and protocol.
type EvalSet struct {
	Name         string  `yaml:"name" json:"name,omitempty"`
	Split        string  `yaml:"split" json:"split,omitempty"`         // task split, default "test"
	Benchmark    string  `yaml:"benchmark" json:"benchmark,omitempty"` // or a shared math benchmark
	Dataset      string  `yaml:"dataset" json:"dataset,omitempty"`     // or a JSONL/Parquet file
	Problems     int     `yaml:"problems" json:"problems,omitempty"`   // how many problems (0 = all for datasets; required for generated tasks)
	Samples      int     `yaml:"samples" json:"samples,omitempty"`     // k for avg@k / pass@k / maj@k; 0 = greedy only
	Temperature  float64 `yaml:"temperature" json:"temperature,omitempty"`
	MaxNewTokens int     `yaml:"max_new_tokens" json:"max_new_tokens,omitempty"`
}

// Checkpoint is the checkpoint schedule.
type Checkpoint struct {
	Every int `yaml:"every" json:"every,omitempty"` // steps between checkpoints; the last step is always saved
	Keep  int `yaml:"keep" json:"keep,omitempty"`   // how many step checkpoints to keep (default 2)
}

// Rollouts is the schedule of the readable rollout logs: every agent's sampled
// responses of a step, with their rewards and what each learner made of them,
// as gzip-compressed JSONL in OUT/rollouts/step-NNNNNNNN.jsonl.gz (the format is
// rollout.Record; `hacrl rollouts OUT --step S` prints them).
type Rollouts struct {
	// Every writes the rollouts of every step s with s % every == 0, where s
	// counts completed steps from 1 as in metrics.jsonl (every: 1 logs every
	// step); 0, the default, writes none.
	Every int `yaml:"every" json:"every,omitempty"`
}

// Load reads, checks and fills in defaults for a config file.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes YAML strictly, applies defaults and validates.
func Parse(data []byte) (*Config, error) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	if err := checkKeys(&root, reflect.TypeOf(Config{}), ""); err != nil {
		return nil, err
	}
	var c Config
	if err := root.Decode(&c); err != nil {
		return nil, err
	}
	c.applyDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

func (c *Config) applyDefaults() {
	if c.Dataset != nil && c.Dataset.TooLong == "" {
		c.Dataset.TooLong = "error"
	}
	if c.Method.Name == "" {
		c.Method.Name = "hacpo"
	}
	if c.Method.Capability == "" {
		c.Method.Capability = "accuracy"
	}
	if c.Method.CrossAdvantage == "" {
		c.Method.CrossAdvantage = "all"
	}
	if c.OnNonFinite == "" {
		c.OnNonFinite = "skip"
	}
	if c.Engine == "" {
		c.Engine = "auto"
	}
	if c.Reward != nil && c.Reward.Timeout == "" {
		c.Reward.Timeout = DefaultRewardTimeout
	}
	if c.Reward != nil && c.Reward.StartTimeout == "" {
		c.Reward.StartTimeout = DefaultRewardStartTimeout
	}
	if c.Batch.ResponsesPerPrompt == 0 {
		c.Batch.ResponsesPerPrompt = 8
	}
	if c.Checkpoint.Keep == 0 {
		c.Checkpoint.Keep = 2
	}
	if c.Eval.AtStart == nil {
		t := true
		c.Eval.AtStart = &t
	}
	for i := range c.Eval.Sets {
		s := &c.Eval.Sets[i]
		if s.Split == "" && s.Benchmark == "" && s.Dataset == "" {
			s.Split = "test"
		}
		if s.Name == "" {
			switch {
			case s.Benchmark != "":
				s.Name = s.Benchmark
			case s.Dataset != "":
				s.Name = strings.TrimSuffix(baseName(s.Dataset), ".jsonl")
			default:
				s.Name = s.Split
			}
		}
		if s.Samples > 0 && s.Temperature == 0 {
			s.Temperature = 1.0
		}
	}
	for i := range c.Agents {
		a := &c.Agents[i]
		if a.Template.Kind == "" {
			a.Template.Kind = "plain"
		}
		o := &a.Optimizer
		if o.Beta1 == 0 {
			o.Beta1 = 0.9
		}
		if o.Beta2 == 0 {
			o.Beta2 = 0.999
		}
		if o.Epsilon == 0 {
			o.Epsilon = 1e-8
		}
		if o.MaxGradNorm == 0 {
			o.MaxGradNorm = 1.0
		}
		if o.WeightDecay == nil {
			wd := 0.01
			o.WeightDecay = &wd
		}
		if o.Schedule == "" {
			o.Schedule = "constant"
		}
		s := &a.Sampling
		if s.Temperature == 0 {
			s.Temperature = 1.0
		}
		if s.TopP == 0 {
			s.TopP = 1.0
		}
		if a.Model != nil {
			m := a.Model
			if m.KVHeads == 0 {
				m.KVHeads = m.Heads
			}
			if m.Hidden == 0 && m.Family == "llama" {
				m.Hidden = LlamaHidden(m.Dim)
			}
			if m.Activation == "" {
				if m.Family == "llama" {
					m.Activation = "silu"
				} else {
					m.Activation = "gelu"
				}
			}
		}
	}
}

func baseName(p string) string {
	if i := strings.LastIndexAny(p, `/\`); i >= 0 {
		return p[i+1:]
	}
	return p
}

// Validate reports the first impossible setting, by its key path.
func (c *Config) Validate() error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{path}, args...)...))
	}
	if c.Steps < 0 {
		bad("steps", "must be >= 0, got %d", c.Steps)
	}
	if (c.Task == nil) == (c.Dataset == nil) {
		bad("task", "give exactly one of task or dataset")
	}
	if c.Task != nil && c.Task.Name == "" {
		bad("task.name", "required (arith or countdown)")
	}
	if c.Dataset != nil && c.Dataset.Path == "" {
		bad("dataset.path", "required (a .jsonl or .parquet file)")
	}
	if c.Dataset != nil {
		checkTooLong(bad, c.Dataset.TooLong)
	}
	if c.Reward != nil {
		validateReward(c.Reward, bad)
	}
	b := c.Batch
	if b.PromptsPerStep <= 0 {
		bad("batch.prompts_per_step", "must be > 0, got %d", b.PromptsPerStep)
	}
	if b.ResponsesPerPrompt <= 0 {
		bad("batch.responses_per_prompt", "must be > 0, got %d", b.ResponsesPerPrompt)
	}
	if b.MiniBatch <= 0 {
		bad("batch.mini_batch", "must be > 0 (sequences per optimizer update), got %d", b.MiniBatch)
	}
	if b.MicroBatch < 0 {
		bad("batch.micro_batch", "must be >= 0, got %d", b.MicroBatch)
	}
	if b.MicroBatch > 0 && b.MiniBatch > 0 && b.MiniBatch%b.MicroBatch != 0 {
		bad("batch.micro_batch", "must divide batch.mini_batch (%d), got %d", b.MiniBatch, b.MicroBatch)
	}
	if len(c.Agents) == 0 {
		bad("agents", "at least one agent is required")
	}
	names := map[string]int{}
	for i, a := range c.Agents {
		p := fmt.Sprintf("agents[%d]", i)
		if a.Name == "" {
			bad(p+".name", "required")
		} else if strings.ContainsAny(a.Name, `/\ `) {
			bad(p+".name", "must not contain '/', '\\' or spaces, got %q", a.Name)
		} else if j, dup := names[a.Name]; dup {
			bad(p+".name", "%q is also the name of agents[%d]", a.Name, j)
		}
		names[a.Name] = i
		if (a.Checkpoint == "") == (a.Model == nil) {
			bad(p, "give exactly one of checkpoint or model")
		}
		if a.Model != nil {
			validateModel(p+".model", a.Model, bad)
			if a.Tokenizer == "" {
				bad(p+".tokenizer", "required with a new model (path of a tokenizer.json)")
			}
		}
		if a.Template.Kind != "plain" && a.Template.Kind != "chat" {
			bad(p+".template.kind", "must be plain or chat, got %q", a.Template.Kind)
		}
		validateOptimizer(p+".optimizer", a.Optimizer, bad)
		s := a.Sampling
		if s.Temperature < 0 {
			bad(p+".sampling.temperature", "must be >= 0, got %g", s.Temperature)
		}
		if s.TopP <= 0 || s.TopP > 1 {
			bad(p+".sampling.top_p", "must be in (0, 1], got %g", s.TopP)
		}
		if s.TopK < 0 {
			bad(p+".sampling.top_k", "must be >= 0 (0 = off), got %d", s.TopK)
		}
		if s.MaxNewTokens <= 0 {
			bad(p+".sampling.max_new_tokens", "must be > 0, got %d", s.MaxNewTokens)
		}
	}
	switch c.Method.Capability {
	case "accuracy", "mean_reward":
	default:
		bad("method.capability", "must be accuracy or mean_reward, got %q", c.Method.Capability)
	}
	switch c.Method.CrossAdvantage {
	case "all", "positive":
	default:
		bad("method.cross_advantage", "must be all or positive, got %q", c.Method.CrossAdvantage)
	}
	switch c.OnNonFinite {
	case "skip", "stop":
	default:
		bad("on_non_finite", "must be skip or stop, got %q", c.OnNonFinite)
	}
	checkEngine(bad, c.Engine)
	if c.Eval.Every < 0 {
		bad("eval.every", "must be >= 0")
	}
	setNames := map[string]bool{}
	for i, s := range c.Eval.Sets {
		p := fmt.Sprintf("eval.sets[%d]", i)
		n := 0
		for _, v := range []string{s.Split, s.Benchmark, s.Dataset} {
			if v != "" {
				n++
			}
		}
		if n != 1 {
			bad(p, "give exactly one of split, benchmark or dataset")
		}
		if s.Split != "" && s.Split != "test" && s.Split != "train" {
			bad(p+".split", "must be test or train, got %q", s.Split)
		}
		if s.Split != "" && c.Task != nil && s.Problems <= 0 {
			bad(p+".problems", "must be > 0 for a generated task's split")
		}
		if s.Samples < 0 || s.Temperature < 0 || s.Problems < 0 {
			bad(p, "problems, samples and temperature must be >= 0")
		}
		if setNames[s.Name] {
			bad(p+".name", "%q is used twice", s.Name)
		}
		setNames[s.Name] = true
	}
	if c.Checkpoint.Every < 0 || c.Checkpoint.Keep < 1 {
		bad("checkpoint", "every must be >= 0 and keep >= 1")
	}
	if c.Rollouts.Every < 0 {
		bad("rollouts.every", "must be >= 0 (0 = off), got %d", c.Rollouts.Every)
	}
	return errors.Join(errs...)
}

// checkTooLong reports a dataset.too_long other than error or drop ("" is
// the default, error).
func checkTooLong(bad func(path, format string, args ...any), v string) {
	switch v {
	case "", "error", "drop":
	default:
		bad("dataset.too_long", "must be error or drop, got %q", v)
	}
}

// LlamaHidden is the default SwiGLU width for a llama model of width dim:
// 8/3·dim rounded up to a multiple of 16 (the parameter count of a 4·dim GELU
// MLP, as in the Llama papers).
func LlamaHidden(dim int) int {
	h := (8*dim + 2) / 3
	return (h + 15) / 16 * 16
}

// validateModel checks a new model's section; path is its key path.
func validateModel(path string, m *NewModel, bad func(path, format string, args ...any)) {
	if m.Family != "gpt" && m.Family != "llama" {
		bad(path+".family", "must be gpt or llama, got %q", m.Family)
	}
	if m.Dim <= 0 || m.Layers <= 0 || m.Heads <= 0 {
		bad(path, "dim, layers and heads must be > 0")
	} else if m.Dim%m.Heads != 0 {
		bad(path+".heads", "must divide dim (%d), got %d", m.Dim, m.Heads)
	}
	if m.KVHeads <= 0 || (m.Heads > 0 && m.Heads%m.KVHeads != 0) {
		bad(path+".kv_heads", "must divide heads (%d), got %d", m.Heads, m.KVHeads)
	}
	if m.MaxSeq <= 0 {
		bad(path+".max_seq", "must be > 0, got %d", m.MaxSeq)
	}
}

// validateOptimizer checks an optimizer section with defaults applied.
func validateOptimizer(path string, o Optimizer, bad func(path, format string, args ...any)) {
	if o.LR <= 0 {
		bad(path+".lr", "must be > 0, got %g", o.LR)
	}
	if *o.WeightDecay < 0 {
		bad(path+".weight_decay", "must be >= 0, got %g", *o.WeightDecay)
	}
	if o.Beta1 < 0 || o.Beta1 >= 1 || o.Beta2 < 0 || o.Beta2 >= 1 {
		bad(path, "beta1 and beta2 must be in [0, 1)")
	}
	if o.MaxGradNorm < 0 {
		bad(path+".max_grad_norm", "must be >= 0, got %g", o.MaxGradNorm)
	}
	switch o.Schedule {
	case "constant", "linear", "cosine":
	default:
		bad(path+".schedule", "must be constant, linear or cosine, got %q", o.Schedule)
	}
	if o.WarmupSteps < 0 {
		bad(path+".warmup_steps", "must be >= 0")
	}
	if o.MinLRRatio < 0 || o.MinLRRatio > 1 {
		bad(path+".min_lr_ratio", "must be in [0, 1], got %g", o.MinLRRatio)
	}
}
