// Package config is the schema of a hacrl run: the agents, the method and its
// hyperparameters, the task or dataset, the batch sizes, the schedule of
// evaluation and checkpoints. Files are YAML. Decoding is strict: an unknown
// key, a value of the wrong type (a fraction for an integer, NaN) or an
// impossible combination fails before any work starts, with the key's path
// (agents[1].sampling.top_p) and line. Command-line overrides (--set
// KEY=VALUE, see Set) are applied to the YAML before it is decoded, so they
// are checked the same way, and an error about a value one set names that
// --set instead of a line. A parsed Config keeps where its values came from,
// so that later checks (train.Resolve's) cite them too (see Config.Where).
//
// Only keys left out take defaults; a value given is kept or refused, never
// replaced. The defaults live in the fields' default and derived tags (see
// schema.go), which also make the reference docs/config.md (go generate).
// Defaults that belong to other packages — the method preset's
// hyperparameters, a task's options — are filled in by train.Resolve.
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
	"io"
	"math"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/hacrl/hacrl/dataset"
	"github.com/hacrl/hacrl/hacpo"
	"github.com/hacrl/hacrl/task"
	"go.yaml.in/yaml/v3"
)

// Config is a whole run: the file `hacrl train` reads.
type Config struct {
	// Name labels the run in logs and reports.
	Name string `yaml:"name,omitempty" json:"name,omitempty"`
	// Seed derives every random draw of the run (prompt order, sampling,
	// evaluation samples): the same config, seed and build give the same
	// metrics. --seed overrides it.
	Seed int64 `yaml:"seed,omitempty" json:"seed,omitempty"`
	// Out is the output directory: metrics, checkpoints, the final agents and
	// the resolved config. Required here or as --out, which overrides it.
	Out string `yaml:"out,omitempty" json:"out,omitempty"`
	// Steps is the number of training steps; 0 trains nothing (the agents are
	// evaluated and saved as they are). --steps overrides it.
	Steps int `yaml:"steps,omitempty" json:"steps,omitempty"`
	// Method is the algorithm: a preset and overrides of its hyperparameters.
	Method Method `yaml:"method,omitempty" json:"method,omitempty"`
	// Task is a generated task; give exactly one of task or dataset.
	Task *Task `yaml:"task,omitempty" json:"task,omitempty"`
	// Dataset is a training prompt set read from a file; give exactly one of
	// task or dataset.
	Dataset *Dataset `yaml:"dataset,omitempty" json:"dataset,omitempty"`
	// Reward is an external reward (a command or an HTTP endpoint) that
	// scores every training response in place of the task's own checker;
	// see docs/reward.md.
	Reward *Reward `yaml:"reward,omitempty" json:"reward,omitempty"`
	// Batch holds the batch sizes (see the package doc).
	Batch Batch `yaml:"batch,omitempty" json:"batch,omitempty"`
	// Agents are the models that train together: at least one, and at least
	// two for the methods that share rollouts (hacpo, naive and the ablations).
	Agents []Agent `yaml:"agents,omitempty" json:"agents,omitempty"`
	// Eval is the evaluation schedule and its sets.
	Eval Eval `yaml:"eval,omitempty" json:"eval,omitempty"`
	// Checkpoint is the checkpoint schedule.
	Checkpoint Checkpoint `yaml:"checkpoint,omitempty" json:"checkpoint,omitempty"`
	// Rollouts schedules the readable rollout logs in OUT/rollouts (off by
	// default).
	Rollouts Rollouts `yaml:"rollouts,omitempty" json:"rollouts,omitempty"`
	// Tracking sends the run's metrics to an experiment tracker as well as
	// to OUT/metrics.jsonl (off by default).
	Tracking *Tracking `yaml:"tracking,omitempty" json:"tracking,omitempty"`
	// OnNonFinite is what a NaN or Inf loss or gradient does: skip drops the
	// mini-batch and goes on, stop ends the run. Either way no non-finite
	// value reaches a checkpoint.
	OnNonFinite string `yaml:"on_non_finite,omitempty" json:"on_non_finite,omitempty" default:"skip"`
	// Backend is the GoMLX backend configuration, e.g. go:parallelism=-1, or
	// xla:cuda (GPUs) or xla:cpu in a build with -tags xla, which loads a
	// PJRT plugin found on the machine (--xla-plugin, docs/gpu.md). The
	// GOMLX_BACKEND environment variable overrides it, and so does --backend.
	Backend string `yaml:"backend,omitempty" json:"backend,omitempty" derived:"the backend package's default (see below)"`
	// Engine is how the models run: native (hand-written CPU kernels), graph
	// (GoMLX graphs, the path for GPUs) or auto (native for float32 models on
	// the CPU backend, graph otherwise).
	Engine string `yaml:"engine,omitempty" json:"engine,omitempty" default:"auto"`

	// Sets are the command-line overrides (--set KEY=VALUE) applied to the
	// file, as given; their values are in the fields above. Not part of the
	// YAML: OUT/config.yaml records them in a comment.
	Sets []string `yaml:"-" json:"-"`

	src *source // where the values came from (see Where)
}

// checkEngine reports an engine name other than auto, native or graph.
func checkEngine(bad badFunc, engine string) {
	switch engine {
	case "auto", "native", "graph":
	default:
		bad("engine", "must be auto, native or graph, got %q", engine)
	}
}

// Method selects the algorithm preset and overrides its hyperparameters.
// Unset fields keep the preset's values (../shared/docs/hacpo-paper.md §4.3).
type Method struct {
	// Name is the preset: hacpo, gspo, gspo2x, grpo, naive, no-adv, no-omega,
	// no-stepwise or no-cross-clip (the paper's methods and ablations),
	// hacpo-capable (HACPO with cross_advantage: capable, the variant
	// docs/results/beyond-hacpo.md found better), or dapo, dr_grpo or cispo
	// (single-agent recipes beyond it). The keys below override its values.
	Name string `yaml:"name,omitempty" json:"name,omitempty" default:"hacpo"`
	// Alpha (α ≥ 0) is the power of the exponential importance-sampling factor
	// sg(clip(s))^α on other agents' samples.
	Alpha *float64 `yaml:"alpha,omitempty" json:"alpha,omitempty" derived:"the preset's (see below)"`
	// Delta (δ, in [0, 1]) sets the lower bound 1 − δ of the clip on other
	// agents' samples.
	Delta *float64 `yaml:"delta,omitempty" json:"delta,omitempty" derived:"the preset's (see below)"`
	// DeltaStep (δ_step ≥ 0) tightens that lower bound by this much with each
	// mini-batch (stepwise clipping).
	DeltaStep *float64 `yaml:"delta_step,omitempty" json:"delta_step,omitempty" derived:"the preset's (see below)"`
	// ClipLow is the lower clip range of the agent's own samples: their ratio is
	// clipped to [1 − clip_low, 1 + clip_high]; in [0, 1).
	ClipLow *float64 `yaml:"clip_low,omitempty" json:"clip_low,omitempty" derived:"the preset's (see below)"`
	// ClipHigh is the upper clip range of the agent's own samples (≥ 0).
	ClipHigh *float64 `yaml:"clip_high,omitempty" json:"clip_high,omitempty" derived:"the preset's (see below)"`
	// KLCoef is the coefficient of the k3 KL to the frozen reference model on
	// the agent's own samples; 0 turns the term, and the reference models, off.
	KLCoef *float64 `yaml:"kl_coef,omitempty" json:"kl_coef,omitempty" derived:"the preset's (see below)"`
	// Window is the capability window K: the number of steps (the current one
	// included) over which each agent's capability is averaged; ≥ 1.
	Window *int `yaml:"window,omitempty" json:"window,omitempty" derived:"the preset's (see below)"`
	// WarmupSteps is the number of first training steps with ω forced to 1.
	WarmupSteps *int `yaml:"warmup_steps,omitempty" json:"warmup_steps,omitempty" derived:"the preset's (see below)"`
	// Capability is the per-step statistic behind an agent's capability:
	// accuracy (the fraction of rewards > 0) or mean_reward.
	Capability string `yaml:"capability,omitempty" json:"capability,omitempty" default:"accuracy"`
	// NormalizeStd divides advantages by the joint group's standard deviation.
	NormalizeStd *bool `yaml:"normalize_std,omitempty" json:"normalize_std,omitempty" derived:"the preset's (see below)"`
	// OmegaMin is the lower clamp of ω(a, b) = P̂a/P̂b (> 0).
	OmegaMin *float64 `yaml:"omega_min,omitempty" json:"omega_min,omitempty" derived:"the preset's (see below)"`
	// OmegaMax is the upper clamp of ω (≥ omega_min).
	OmegaMax *float64 `yaml:"omega_max,omitempty" json:"omega_max,omitempty" derived:"the preset's (see below)"`
	// CrossAdvantage is which of the other agents' samples with a negative
	// advantage count: all (the paper); positive, none (a diagnostic,
	// hacpo.Settings.CrossPositiveOnly); or capable, those of agents at least
	// as capable as the learner (ω ≥ 1; hacpo/doc.go decision 35). Methods
	// that share rollouts only.
	CrossAdvantage string `yaml:"cross_advantage,omitempty" json:"cross_advantage,omitempty" derived:"the preset's: capable for hacpo-capable, else all"`
	// CrossBounds is what HACPO's cross clip bounds: fixed, the ratio against
	// the source in [L_m, 1] (the paper); adaptive, the same with the lower
	// bound scaled by the median of the learner's own start-of-step ratios on
	// each source's samples; decoupled, the learner's movement since the step
	// started, with the self clip range, the ratio against the source a
	// truncated importance weight (hacpo/doc.go decision 36). Beyond the
	// paper; methods with HACPO's cross term only.
	CrossBounds string `yaml:"cross_bounds,omitempty" json:"cross_bounds,omitempty" default:"fixed"`
	// Semantics is whose mini-batch membership and loss aggregation the run
	// follows: v1, the authors' verl-V1 port (each learner's own samples
	// first, then the other agents'; each term a mean of per-sequence means),
	// or original, their verl fork behind the paper's numbers (verl's
	// balance_batch spreads a learner's cross samples over the step's
	// mini-batches; the KL, and GRPO's loss, are token means over the
	// mini-batch). original balances over 8 ranks, like the paper's 8 GPUs:
	// batch.mini_batch and each step's sequences must be multiples of 8. See
	// hacpo/doc.go, decisions 23–26.
	Semantics string `yaml:"semantics,omitempty" json:"semantics,omitempty" derived:"v1"`
	// ResponsesMultiplier (≥ 1) makes each agent sample this many times
	// batch.responses_per_prompt responses per prompt: GSPO×n, the
	// single-agent baseline that trains on as many sequences per step as
	// n-agent HACPO (method: {name: gspo2x, responses_multiplier: 3} for
	// three agents). 0 or absent: the preset's.
	ResponsesMultiplier int `yaml:"responses_multiplier,omitempty" json:"responses_multiplier,omitempty" derived:"2 for gspo2x, else 1"`
	// LossAgg is how per-token terms become the loss of a mini-batch:
	// seq-mean-token-mean (each sequence's token mean, averaged over the
	// sequences: the paper's), token-mean (over every token: DAPO's, TRL's
	// default), seq-mean-token-sum, or seq-mean-token-sum-norm (token sums
	// over sequences × max_new_tokens: Dr. GRPO's). Not with semantics
	// original, which fixes its own. See hacpo/doc.go, decision 27.
	LossAgg *string `yaml:"loss_agg,omitempty" json:"loss_agg,omitempty" derived:"the preset's (see below)"`
	// AdvantageStd is whose reward standard deviation divides the
	// advantages: group (each prompt's joint group, Eq 6), batch (the whole
	// step's, TRL's scale_rewards: batch) or none (Dr. GRPO); none is
	// normalize_std: false.
	AdvantageStd *string `yaml:"advantage_std,omitempty" json:"advantage_std,omitempty" derived:"the preset's (see below)"`
	// SelfRule is the objective of an agent's own samples: ppo (the clipped
	// min of the paper's methods) or cispo (the clipped ratio as a detached
	// weight on log π: every token keeps its gradient; clip_low 1 means no
	// lower bound). See hacpo/doc.go, decision 30.
	SelfRule *string `yaml:"self_rule,omitempty" json:"self_rule,omitempty" derived:"the preset's (see below)"`
	// KLEstimator is the per-token KL estimator: k1 (log π − log π_ref), k2
	// (half its square) or k3 (verl's low_var_kl).
	KLEstimator *string `yaml:"kl_estimator,omitempty" json:"kl_estimator,omitempty" derived:"the preset's (see below)"`
	// KLInReward moves the KL from the loss into each response's reward: R −
	// kl_coef·Σ_t KL of the sampling policy against the reference (verl's
	// use_kl_in_reward). Only methods that do not share rollouts.
	KLInReward *bool `yaml:"kl_in_reward,omitempty" json:"kl_in_reward,omitempty" derived:"the preset's (see below)"`
	// EntropyCoef (≥ 0) subtracts this times the agent's token entropy on its
	// own samples, aggregated like the policy term, from the loss.
	EntropyCoef *float64 `yaml:"entropy_coef,omitempty" json:"entropy_coef,omitempty" derived:"the preset's (see below)"`
	// MaskTruncated leaves responses cut at max_new_tokens out of the loss
	// (they still count in their group's advantages).
	MaskTruncated *bool `yaml:"mask_truncated,omitempty" json:"mask_truncated,omitempty" derived:"the preset's (see below)"`
	// OverlongPenalty (≥ 0) is DAPO's soft overlong punishment: a response
	// longer than max_new_tokens − overlong_buffer tokens loses reward
	// linearly, down to −overlong_penalty at max_new_tokens; 0 turns it off.
	OverlongPenalty *float64 `yaml:"overlong_penalty,omitempty" json:"overlong_penalty,omitempty" derived:"the preset's (see below)"`
	// OverlongBuffer is the length of that ramp in tokens, in [1, every
	// agent's max_new_tokens]; left out, a fifth of the smallest
	// max_new_tokens (DAPO's 4096 of 20480).
	OverlongBuffer *int `yaml:"overlong_buffer,omitempty" json:"overlong_buffer,omitempty" derived:"the preset's (see below)"`
	// DynamicSampling is DAPO's: prompts whose rewards are all equal (in the
	// joint group, for methods that share rollouts) are dropped and more
	// prompts sampled until the step has batch.prompts_per_step of them, or
	// max_sample_rounds rounds have run. See hacpo/doc.go, decision 28.
	DynamicSampling *bool `yaml:"dynamic_sampling,omitempty" json:"dynamic_sampling,omitempty" derived:"the preset's (see below)"`
	// MaxSampleRounds (≥ 1) bounds the sampling rounds of a step under
	// dynamic sampling, the first included; a step that still lacks prompts
	// trains on those it has (metric dynamic/kept_prompts).
	MaxSampleRounds *int `yaml:"max_sample_rounds,omitempty" json:"max_sample_rounds,omitempty" derived:"the preset's (see below)"`
	// RolloutIS corrects for samplers that are not the trainer (rollout
	// engine openai, sample_dtype bfloat16): each response's policy term is
	// weighted by min(π_old/π_sampler, rollout_is_cap), per token (token), or
	// per sequence from the sum (sequence) or mean (geometric) of the
	// log-ratios; off: no correction. token is refused with shared rollouts.
	// See hacpo/doc.go, decision 33.
	RolloutIS *string `yaml:"rollout_is,omitempty" json:"rollout_is,omitempty" derived:"the preset's (see below)"`
	// RolloutISCap (≥ 1) truncates those weights.
	RolloutISCap *float64 `yaml:"rollout_is_cap,omitempty" json:"rollout_is_cap,omitempty" derived:"the preset's (see below)"`
}

// Task names a generated task and its options. Options left out take the
// task's defaults (see below); the task checks their ranges, and an option of
// the other task is an error.
type Task struct {
	// Name is the task: arith (multi-digit arithmetic) or countdown (reach a
	// target number from given numbers).
	Name string `yaml:"name,omitempty" json:"name,omitempty"`
	// Seed selects the problems, independently of the run's seed, so every run
	// seed sees the same test set. A problem's split is fixed by its text, so
	// no seed leaks a test problem into training.
	Seed uint64 `yaml:"seed,omitempty" json:"seed,omitempty"`
	// FormatWeight is the reward of a wrong but well-formatted response (one
	// with a parseable final answer line), in [0, 1); 0 rewards only correct
	// answers.
	FormatWeight float64 `yaml:"format_weight,omitempty" json:"format_weight,omitempty"`
	// Digits (arith) is the number of digits of each operand, 1..12.
	Digits int `yaml:"digits,omitempty" json:"digits,omitempty" derived:"the task's (see below)" task:"arith"`
	// Ops (arith) is the number of operations per problem, 1..4.
	Ops int `yaml:"ops,omitempty" json:"ops,omitempty" derived:"the task's (see below)" task:"arith"`
	// Operators (arith) are the operators to draw from: a non-empty subset of
	// "+-*" without repeats.
	Operators string `yaml:"operators,omitempty" json:"operators,omitempty" derived:"the task's (see below)" task:"arith"`
	// MulDigits (arith) is the number of digits of each multiplier, 1..3.
	MulDigits int `yaml:"mul_digits,omitempty" json:"mul_digits,omitempty" derived:"the task's (see below)" task:"arith"`
	// Numbers (countdown) is how many numbers a problem gives, 3..6.
	Numbers int `yaml:"numbers,omitempty" json:"numbers,omitempty" derived:"the task's (see below)" task:"countdown"`
	// MaxNumber (countdown) bounds the given numbers, drawn from
	// 1..max_number; 2..1000.
	MaxNumber int `yaml:"max_number,omitempty" json:"max_number,omitempty" derived:"the task's (see below)" task:"countdown"`
	// MaxTarget (countdown) bounds the target, drawn from 1..max_target;
	// 10..1000000.
	MaxTarget int `yaml:"max_target,omitempty" json:"max_target,omitempty" derived:"the task's (see below)" task:"countdown"`
	// Fractions (countdown) lets expressions pass through non-integer
	// intermediate values, e.g. (1/3)*6; false: every division must be exact.
	Fractions bool `yaml:"fractions,omitempty" json:"fractions,omitempty" task:"countdown"`
}

// Dataset is a training prompt set read from a JSONL or Parquet file (by its
// extension; verl's parquet layout is understood), or a data set of the shared
// data directory by name (path: math_train, gsm8k, ...; its fields are
// fixed). Answers are checked with the math verifier.
type Dataset struct {
	// Path is the .jsonl or .parquet file.
	Path string `yaml:"path,omitempty" json:"path,omitempty"`
	// QuestionField is the dotted path of a record's question; "a|b" takes
	// the first present. A list of chat messages gives its last user message.
	QuestionField string `yaml:"question_field,omitempty" json:"question_field,omitempty" derived:"question (JSONL), prompt (Parquet)"`
	// AnswerField is the dotted path of a record's reference answer.
	AnswerField string `yaml:"answer_field,omitempty" json:"answer_field,omitempty" derived:"answer (JSONL), reward_model.ground_truth (Parquet)"`
	// SolutionField is the dotted path of a worked solution, which SFT learns;
	// none when empty.
	SolutionField string `yaml:"solution_field,omitempty" json:"solution_field,omitempty"`
	// IDField is the dotted path of a record's id (unique); when empty, a
	// problem's id is its line or row number.
	IDField string `yaml:"id_field,omitempty" json:"id_field,omitempty"`
	// PromptSuffix is appended to every question, e.g. the paper's \boxed{}
	// instruction.
	PromptSuffix string `yaml:"prompt_suffix,omitempty" json:"prompt_suffix,omitempty"`
	// TooLong says what happens to training problems whose prompt, with an
	// agent's template and tokenizer, leaves no room for that agent's
	// sampling.max_new_tokens within its model's max_seq. They are all
	// found before the first step: error stops the run with their count
	// per agent and the first few problem ids; drop leaves every problem
	// too long for any agent out of all agents' training sets and logs how
	// many.
	TooLong string `yaml:"too_long,omitempty" json:"too_long,omitempty" default:"error"`
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
	Command []string `yaml:"command,omitempty" json:"command,omitempty"`
	// URL is an HTTP endpoint that answers each request POSTed to it as a
	// JSON body, e.g. http://127.0.0.1:8000/reward. Give command or url.
	URL string `yaml:"url,omitempty" json:"url,omitempty"`
	// TokenEnv names an environment variable holding a bearer token sent
	// as "Authorization: Bearer …" with every HTTP request (url only); the
	// token itself never goes in the config.
	TokenEnv string `yaml:"token_env,omitempty" json:"token_env,omitempty"`
	// Timeout bounds each request, as a Go duration ("30s", "2m"); default
	// "60s". A command that does not answer in time is killed and the run
	// stops with an error.
	Timeout string `yaml:"timeout,omitempty" json:"timeout,omitempty" default:"60s"`
	// StartTimeout bounds the start: launching the command and its answer
	// to the first, empty request (time to load a model, say); default "2m".
	StartTimeout string `yaml:"start_timeout,omitempty" json:"start_timeout,omitempty" default:"2m"`
	// BatchSize is the most responses per request; 0 (default) sends all
	// of a step's responses, every agent's, in one request.
	BatchSize int `yaml:"batch_size,omitempty" json:"batch_size,omitempty"`
	// Eval also scores the evaluation sets of the task's splits and of
	// dataset files with this reward (correct = the answer's "correct",
	// else reward >= the range's max); default false: evaluation keeps the
	// task's own checker. Benchmark sets always keep the math verifier.
	Eval bool `yaml:"eval,omitempty" json:"eval,omitempty"`
	// Range is [min, max], the rewards this reward gives; an answer outside
	// it stops the run. min is the reward of a plain failure: HACPO's
	// capability-weighted baseline is anchored there, and its guard caps the
	// baseline at max (hacpo/doc.go decision 32).
	Range []float64 `yaml:"range,omitempty" json:"range,omitempty" derived:"[0, 1]"`
	// SuccessAbove is the threshold above which a reward counts as a success
	// for an agent's capability (method.capability accuracy), in [min, max).
	SuccessAbove *float64 `yaml:"success_above,omitempty" json:"success_above,omitempty" derived:"the range's min"`
}

// RewardRange returns the reward range and success threshold of the run:
// the external reward's range and success_above, or [0, 1] and 0 for a
// task's own checker (and their defaults).
func (c *Config) RewardRange() (min, max, successAbove float64) {
	min, max = 0, 1
	r := c.Reward
	if r != nil && len(r.Range) == 2 {
		min, max = r.Range[0], r.Range[1]
	}
	successAbove = min
	if r != nil && r.SuccessAbove != nil {
		successAbove = *r.SuccessAbove
	}
	return min, max, successAbove
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
	if r.Range != nil {
		if len(r.Range) != 2 || !(r.Range[0] < r.Range[1]) || math.IsInf(r.Range[0], 0) || math.IsInf(r.Range[1], 0) {
			bad("reward.range", "must be [min, max] with finite min < max, got %v", r.Range)
		}
	}
	if r.SuccessAbove != nil {
		lo, hi := 0.0, 1.0
		if len(r.Range) == 2 {
			lo, hi = r.Range[0], r.Range[1]
		}
		if v := *r.SuccessAbove; !(v >= lo && v < hi) {
			bad("reward.success_above", "must be in [min, max) of the reward range [%g, %g], got %g", lo, hi, v)
		}
	}
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Batch holds the four batch sizes (see the package doc).
type Batch struct {
	// PromptsPerStep (B) is the number of prompts drawn each step (> 0).
	PromptsPerStep int `yaml:"prompts_per_step,omitempty" json:"prompts_per_step,omitempty"`
	// ResponsesPerPrompt (G) is the number of responses each agent samples per
	// prompt (2G for gspo2x).
	ResponsesPerPrompt int `yaml:"responses_per_prompt,omitempty" json:"responses_per_prompt,omitempty" default:"8"`
	// MiniBatch is the number of sequences per optimizer update (one AdamW
	// step); > 0.
	MiniBatch int `yaml:"mini_batch,omitempty" json:"mini_batch,omitempty"`
	// MicroBatch is the number of sequences per forward/backward pass
	// (gradient accumulation); it must divide mini_batch.
	MicroBatch int `yaml:"micro_batch,omitempty" json:"micro_batch,omitempty" derived:"mini_batch"`
}

// Agent is one participant: a model (new or from a checkpoint), its tokenizer
// and prompt template, its optimizer and its sampling settings.
type Agent struct {
	// Name identifies the agent in metrics, checkpoints and OUT/final/<name>:
	// unique, without '/', '\' or spaces.
	Name string `yaml:"name,omitempty" json:"name,omitempty"`
	// Checkpoint is a directory with config.json, model.safetensors and
	// tokenizer.json (and agent.json); give exactly one of checkpoint or model.
	Checkpoint string `yaml:"checkpoint,omitempty" json:"checkpoint,omitempty"`
	// Model is a freshly initialised model instead of a checkpoint.
	Model *NewModel `yaml:"model,omitempty" json:"model,omitempty"`
	// Tokenizer is a tokenizer.json file: required with model; with checkpoint
	// it replaces the checkpoint's own.
	Tokenizer string `yaml:"tokenizer,omitempty" json:"tokenizer,omitempty" derived:"the checkpoint's tokenizer.json"`
	// Template is the prompt template.
	Template Template `yaml:"template,omitempty" json:"template,omitempty"`
	// Optimizer is the agent's AdamW optimizer and learning-rate schedule.
	Optimizer Optimizer `yaml:"optimizer,omitempty" json:"optimizer,omitempty"`
	// Sampling are the agent's rollout sampling settings.
	Sampling Sampling `yaml:"sampling,omitempty" json:"sampling,omitempty"`
	// LoRA, when given, trains low-rank adapters on the agent's frozen
	// weights instead of the weights themselves (as PEFT's LoraConfig); the
	// frozen base is the agent's KL reference, and checkpoints and
	// OUT/final/<agent> hold the adapters in PEFT's layout.
	LoRA *LoRA `yaml:"lora,omitempty" json:"lora,omitempty"`
	// Rollout is where the agent samples its rollouts: in-process (the
	// default, when the section is left out) or through an
	// OpenAI-compatible inference server (vLLM, SGLang, hacrl serve).
	Rollout *Rollout `yaml:"rollout,omitempty" json:"rollout,omitempty"`
	// ComputeDType is the dtype of the agent's matrix products: float32, or
	// bfloat16 for mixed precision as PyTorch's autocast does it (products
	// on bfloat16 operands; weights, gradients, optimizer state, norms,
	// softmax and log-probs in float32). bfloat16 runs on the graph engine
	// of the XLA backend (xla:cuda, xla:cpu); engine native refuses it.
	ComputeDType string `yaml:"compute_dtype,omitempty" json:"compute_dtype,omitempty" default:"float32"`
	// FrozenDType is how a LoRA agent's frozen base weights are held:
	// float32, or bfloat16 — the base's matrix weights (every layer's
	// projections and an untied LM head) rounded once to bfloat16 (to
	// nearest, ties to even) and read by the native engine's products as
	// such, half their memory; the agent trains and samples exactly as it
	// would on a float32 base rounded the same way. Embeddings, norms and
	// biases, the adapters and their optimizer state stay float32. Needs a
	// lora section and the native engine.
	FrozenDType string `yaml:"frozen_dtype,omitempty" json:"frozen_dtype,omitempty" default:"float32"`
	// SampleDType is the dtype of the weights the agent samples its
	// rollouts with: float32 (its own), or bfloat16 — a copy of every
	// product's weights rounded to bfloat16, made again after each update,
	// that decoding reads at half the bytes. The old log-probs still come
	// from the float32 weights; the mean |log-prob| gap per sampled token
	// between the two is reported each step as rollout/logprob_abs_diff.
	// Needs the native engine and in-process rollouts.
	SampleDType string `yaml:"sample_dtype,omitempty" json:"sample_dtype,omitempty" default:"float32"`
}

// Rollout engines and server dialects (Rollout.Engine, Rollout.Dialect).
const (
	RolloutLocal  = "local"
	RolloutOpenAI = "openai"
	DialectVLLM   = "vllm"
	DialectSGLang = "sglang"
	DialectHacrl  = "hacrl"
)

// Rollout is an agent's rollout engine. With engine openai every response
// of a training step is one request to the server (a seed per response),
// the trainer still computes the old log-probs itself, and after each of
// the agent's updates it writes the agent's weights as a Hugging Face
// checkpoint into weights_dir and has the server reload them. Evaluation
// samples in-process either way.
type Rollout struct {
	// Engine is local (the agent's own model samples, in-process) or openai
	// (an OpenAI-compatible server at url samples).
	Engine string `yaml:"engine,omitempty" json:"engine,omitempty" default:"local"`
	// URL is the server's base address, e.g. http://127.0.0.1:8000 (no
	// /v1); required with engine openai.
	URL string `yaml:"url,omitempty" json:"url,omitempty"`
	// Model is the model name sent in each request (the server's
	// --served-model-name); required with dialects vllm and hacrl.
	Model string `yaml:"model,omitempty" json:"model,omitempty"`
	// APIKeyEnv names an environment variable holding the server's API key,
	// sent as "Authorization: Bearer …"; the key itself never goes in the
	// config.
	APIKeyEnv string `yaml:"api_key_env,omitempty" json:"api_key_env,omitempty"`
	// Dialect is the server's kind, which decides the sampling endpoint and
	// the weight reload: vllm (/v1/completions; reload through the dev-mode
	// /collective_rpc reload_weights, from the server's model path), sglang
	// (native /generate; /update_weights_from_disk) or hacrl (hacrl serve:
	// /v1/completions; /update_weights_from_disk). Required with engine
	// openai.
	Dialect string `yaml:"dialect,omitempty" json:"dialect,omitempty"`
	// WeightsDir is where the trainer writes the weights the server
	// reloads. For sglang and hacrl each version is a new directory
	// WEIGHTS_DIR/v<step> (older ones removed once the server has
	// switched). For vllm, which reloads from the path it was started with,
	// it must be that path and a symbolic link (to the checkpoint the
	// server started from); each version is written beside it and the link
	// swapped atomically before the reload.
	WeightsDir string `yaml:"weights_dir,omitempty" json:"weights_dir,omitempty" derived:"OUT/rollout-weights/<agent> (sglang, hacrl); required for vllm"`
	// Timeout bounds each request (a response, or a weight reload), as a Go
	// duration ("30s", "10m").
	Timeout string `yaml:"timeout,omitempty" json:"timeout,omitempty" default:"10m"`
	// Concurrency is the most requests in flight at once (> 0).
	Concurrency int `yaml:"concurrency,omitempty" json:"concurrency,omitempty" default:"16"`
	// Retries is how many times a request that failed to connect (refused,
	// reset, no answer) is retried, with a growing pause; an answer with an
	// error status is never retried.
	Retries *int `yaml:"retries,omitempty" json:"retries,omitempty" default:"3"`
	// MaxStaleRetries is how many times responses the server reports as
	// sampled with other weights than the ones last pushed are sampled
	// again before the run stops with an error; they are never used as
	// on-policy.
	MaxStaleRetries *int `yaml:"max_stale_retries,omitempty" json:"max_stale_retries,omitempty" default:"2"`
}

// Remote reports whether the agent samples through a server.
func (r *Rollout) Remote() bool { return r != nil && r.Engine == RolloutOpenAI }

// TimeoutDuration is the parsed timeout of a validated section.
func (r *Rollout) TimeoutDuration() time.Duration {
	d, _ := time.ParseDuration(r.Timeout)
	return d
}

// validateRollout checks an agent's rollout section with defaults applied.
func validateRollout(path string, r *Rollout, bad badFunc) {
	switch r.Engine {
	case RolloutLocal:
		for _, f := range []struct{ key, v string }{{"url", r.URL}, {"model", r.Model}, {"api_key_env", r.APIKeyEnv}, {"dialect", r.Dialect}, {"weights_dir", r.WeightsDir}} {
			if f.v != "" {
				bad(path+"."+f.key, "only with engine: openai (engine is local)")
			}
		}
		return
	case RolloutOpenAI:
	default:
		bad(path+".engine", "must be local or openai, got %q", r.Engine)
		return
	}
	if r.URL == "" {
		bad(path+".url", "required with engine openai (e.g. http://127.0.0.1:8000)")
	} else if u, err := url.Parse(r.URL); err != nil {
		bad(path+".url", "not a URL: %v", err)
	} else if u.Scheme != "http" && u.Scheme != "https" {
		bad(path+".url", "must start with http:// or https://, got %q", r.URL)
	} else if u.Host == "" {
		bad(path+".url", "has no host: %q", r.URL)
	}
	switch r.Dialect {
	case DialectVLLM, DialectHacrl:
		if r.Model == "" {
			bad(path+".model", "required with dialect %s (the server's model name)", r.Dialect)
		}
	case DialectSGLang:
	case "":
		bad(path+".dialect", "required with engine openai: vllm, sglang or hacrl")
	default:
		bad(path+".dialect", "must be vllm, sglang or hacrl, got %q", r.Dialect)
	}
	if r.Dialect == DialectVLLM && r.WeightsDir == "" {
		bad(path+".weights_dir", "required with dialect vllm: the model path the server was started with (a symbolic link the trainer swaps)")
	}
	if r.APIKeyEnv != "" && !envName.MatchString(r.APIKeyEnv) {
		bad(path+".api_key_env", "must be the name of an environment variable (letters, digits, _), got %q", r.APIKeyEnv)
	}
	if t, err := time.ParseDuration(r.Timeout); err != nil {
		bad(path+".timeout", "must be a duration like 30s or 10m, got %q", r.Timeout)
	} else if t <= 0 {
		bad(path+".timeout", "must be > 0, got %q", r.Timeout)
	}
	if r.Concurrency <= 0 {
		bad(path+".concurrency", "must be > 0, got %d", r.Concurrency)
	}
	if *r.Retries < 0 {
		bad(path+".retries", "must be >= 0 (0 = no retry), got %d", *r.Retries)
	}
	if *r.MaxStaleRetries < 0 {
		bad(path+".max_stale_retries", "must be >= 0 (0 = stop at the first stale response), got %d", *r.MaxStaleRetries)
	}
}

// LoRA configures an agent's low-rank adapters (Hu et al., 2021): a targeted
// linear layer y = x·Wᵀ becomes y = x·Wᵀ + (alpha/rank)·x·Aᵀ·Bᵀ, with A
// drawn at random and B zero (so step 0 is the base model), and only A and
// B trained.
type LoRA struct {
	// Rank is r, the adapters' inner dimension (> 0; 8–64 is usual).
	Rank int `yaml:"rank,omitempty" json:"rank,omitempty"`
	// Alpha is lora_alpha: the adapters' output is scaled by alpha/rank
	// (> 0). The default 2·rank is the common choice for fine-tuning;
	// PEFT's own default is lora_alpha 8 whatever r is.
	Alpha float64 `yaml:"alpha,omitempty" json:"alpha,omitempty" derived:"2·rank"`
	// Dropout is lora_dropout; it must be 0: dropout on the adapters' input
	// is not implemented (PEFT's default, 0.05, would change results, so it
	// is not accepted silently).
	Dropout float64 `yaml:"dropout,omitempty" json:"dropout,omitempty"`
	// TargetModules are the adapted linear layers of every block, by module
	// name as in PEFT's target_modules: a list of q_proj, k_proj, v_proj,
	// o_proj, gate_proj, up_proj, down_proj (llama, qwen2, qwen3) or c_attn,
	// c_proj, c_fc (gpt), or full module paths (model.layers.0.mlp.up_proj);
	// or the string all-linear, every linear layer of the blocks (not the
	// LM head).
	TargetModules Modules `yaml:"target_modules,omitempty" json:"target_modules,omitempty" derived:"all-linear"`
	// UseRSLoRA scales by alpha/√rank instead of alpha/rank (rank-stabilised
	// LoRA, PEFT's use_rslora).
	UseRSLoRA bool `yaml:"use_rslora,omitempty" json:"use_rslora,omitempty"`
}

// AllLinear is the target_modules value that adapts every linear layer of
// the blocks.
const AllLinear = "all-linear"

// LoRAModules are the short module names target_modules may list.
var LoRAModules = []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "c_attn", "c_proj", "c_fc"}

// Modules is a target_modules list. In YAML it is a list of names or the
// single string all-linear (read as the list [all-linear]).
type Modules []string

// UnmarshalYAML reads a list of names or the string all-linear.
func (m *Modules) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Value != AllLinear {
			return fmt.Errorf("must be a list of module names or %s, got %q", AllLinear, n.Value)
		}
		*m = Modules{AllLinear}
		return nil
	case yaml.SequenceNode:
		var names []string
		if err := n.Decode(&names); err != nil {
			return fmt.Errorf("must be a list of module names or %s: %v", AllLinear, err)
		}
		if len(names) == 0 {
			return fmt.Errorf("must not be empty; leave the key out for the default (%s)", AllLinear)
		}
		*m = names
		return nil
	}
	return fmt.Errorf("must be a list of module names or %s", AllLinear)
}

// NewModel describes a freshly initialised model.
type NewModel struct {
	// Family is gpt (LayerNorm, learned positions, GELU) or llama (RMSNorm,
	// rotary positions, SwiGLU, grouped-query attention).
	Family string `yaml:"family,omitempty" json:"family,omitempty"`
	// Dim is the model width (> 0).
	Dim int `yaml:"dim,omitempty" json:"dim,omitempty"`
	// Layers is the number of transformer blocks (> 0).
	Layers int `yaml:"layers,omitempty" json:"layers,omitempty"`
	// Heads is the number of attention heads; it must divide dim.
	Heads int `yaml:"heads,omitempty" json:"heads,omitempty"`
	// KVHeads is the number of key/value heads (grouped-query attention, llama
	// only); it must divide heads.
	KVHeads int `yaml:"kv_heads,omitempty" json:"kv_heads,omitempty" derived:"heads"`
	// Hidden is the MLP's inner width.
	Hidden int `yaml:"hidden,omitempty" json:"hidden,omitempty" derived:"gpt: 4·dim; llama: 8/3·dim rounded up to a multiple of 16"`
	// MaxSeq is the context length in tokens, prompt and response together.
	MaxSeq int `yaml:"max_seq,omitempty" json:"max_seq,omitempty"`
	// Activation is the MLP's activation: gelu (exact), gelu_new (tanh) or
	// relu for gpt; silu for llama.
	Activation string `yaml:"activation,omitempty" json:"activation,omitempty" derived:"gpt: gelu; llama: silu"`
	// TieEmbeddings shares the token embedding with the output head.
	TieEmbeddings bool `yaml:"tie_embeddings,omitempty" json:"tie_embeddings,omitempty"`
	// Seed draws the initial weights.
	Seed int64 `yaml:"seed,omitempty" json:"seed,omitempty"`
	// ModelType is the Hugging Face model_type of a llama-family model:
	// llama, qwen2 or qwen3 (qwen3 adds per-head RMSNorms on queries and
	// keys, q_norm and k_norm).
	ModelType string `yaml:"model_type,omitempty" json:"model_type,omitempty" derived:"gpt: gpt2; llama: llama"`
	// HeadDim is the width of one attention head (llama family); it may
	// differ from dim/heads, as Qwen3's 128 does.
	HeadDim int `yaml:"head_dim,omitempty" json:"head_dim,omitempty" derived:"dim/heads"`
	// RopeTheta is the rotary base (llama family), such as Qwen3's 1000000
	// or Llama 3's 500000.
	RopeTheta float64 `yaml:"rope_theta,omitempty" json:"rope_theta,omitempty" derived:"llama: 10000"`
	// RopeScaling rescales the rotary frequencies as Llama 3.1 and 3.2 do
	// (llama family).
	RopeScaling *RopeScaling `yaml:"rope_scaling,omitempty" json:"rope_scaling,omitempty"`
}

// RopeScaling is Hugging Face's rope_scaling of rope_type llama3: with
// wavelength λ of a rotary frequency and L = original_max_position_embeddings,
// frequencies of λ > L/low_freq_factor are divided by factor, those of
// λ < L/high_freq_factor are kept, and those between are interpolated.
type RopeScaling struct {
	// RopeType is the kind of scaling; only llama3 is supported.
	RopeType string `yaml:"rope_type,omitempty" json:"rope_type,omitempty"`
	// Factor divides the low frequencies (> 0; Llama 3.2: 32).
	Factor float64 `yaml:"factor,omitempty" json:"factor,omitempty"`
	// LowFreqFactor sets the wavelength L/low_freq_factor above which
	// frequencies are divided by factor (> 0; Llama 3.2: 1).
	LowFreqFactor float64 `yaml:"low_freq_factor,omitempty" json:"low_freq_factor,omitempty"`
	// HighFreqFactor sets the wavelength L/high_freq_factor below which
	// frequencies are kept (> low_freq_factor; Llama 3.2: 4).
	HighFreqFactor float64 `yaml:"high_freq_factor,omitempty" json:"high_freq_factor,omitempty"`
	// OriginalMaxPositionEmbeddings is L, the context length the
	// frequencies were made for (> 0; Llama 3.2: 8192).
	OriginalMaxPositionEmbeddings int `yaml:"original_max_position_embeddings,omitempty" json:"original_max_position_embeddings,omitempty"`
}

// Template is the prompt template.
type Template struct {
	// Kind is plain (the question as plain text), chat (ChatML, with the
	// tokenizer's <|im_start|>/<|im_end|> tokens) or hf (the checkpoint's
	// own Jinja chat_template, from the tokenizer_config.json beside its
	// tokenizer.json or the chat_template.jinja that replaces it, with
	// add_generation_prompt; responses end at its end-of-turn token such as
	// <|im_end|> or <|eot_id|>). A checkpoint with a chat template and no
	// agent.json is prompted with its template; plain on request.
	Kind string `yaml:"kind,omitempty" json:"kind,omitempty" derived:"plain for a new model; an agent from a checkpoint: the checkpoint's (its agent.json); without agent.json, hf when the checkpoint has a chat template (chat_template in its tokenizer_config.json, or a chat_template.jinja), else plain; plain only on request"`
	// System is the system message; none when empty.
	System string `yaml:"system,omitempty" json:"system,omitempty"`
	// Vars are extra variables of an hf template, such as Qwen3's
	// enable_thinking: false; only with kind hf, and not messages,
	// add_generation_prompt, bos_token or eos_token, which the renderer sets.
	Vars map[string]any `yaml:"vars,omitempty" json:"vars,omitempty"`
}

// TemplateKinds are the values of Template.Kind.
var TemplateKinds = []string{"plain", "chat", "hf"}

// validateTemplate checks a template's kind (when set or required) and vars.
func validateTemplate(p string, t Template, required bool, bad func(string, string, ...any)) {
	if (t.Kind != "" || required) && !slices.Contains(TemplateKinds, t.Kind) {
		bad(p+".kind", "must be plain, chat or hf, got %q", t.Kind)
	}
	if len(t.Vars) > 0 && t.Kind != "hf" && t.Kind != "" {
		bad(p+".vars", "applies to kind hf only, not %s", t.Kind)
	}
	for _, k := range []string{"messages", "add_generation_prompt", "bos_token", "eos_token", "raise_exception"} {
		if _, ok := t.Vars[k]; ok {
			bad(p+".vars."+k, "is set by the template renderer and cannot be given")
		}
	}
}

// Optimizer is AdamW with a learning-rate schedule.
type Optimizer struct {
	// LR is the peak learning rate (> 0).
	LR float64 `yaml:"lr,omitempty" json:"lr,omitempty"`
	// WeightDecay is AdamW's decoupled weight decay of matrices and
	// embeddings (not biases or norm gains); 0 turns it off.
	WeightDecay *float64 `yaml:"weight_decay,omitempty" json:"weight_decay,omitempty" default:"0.01"`
	// Beta1 is AdamW's first-moment decay, in (0, 1).
	Beta1 float64 `yaml:"beta1,omitempty" json:"beta1,omitempty" default:"0.9"`
	// Beta2 is AdamW's second-moment decay, in (0, 1).
	Beta2 float64 `yaml:"beta2,omitempty" json:"beta2,omitempty" default:"0.999"`
	// Epsilon is added to AdamW's denominator (> 0).
	Epsilon float64 `yaml:"epsilon,omitempty" json:"epsilon,omitempty" default:"1e-8"`
	// MaxGradNorm clips the global gradient norm (over all parameters) to this
	// value; 0 turns clipping off.
	MaxGradNorm *float64 `yaml:"max_grad_norm,omitempty" json:"max_grad_norm,omitempty" default:"1"`
	// Schedule is the learning rate after warm-up: constant, linear or cosine
	// (decaying to min_lr_ratio·lr at the last step).
	Schedule string `yaml:"schedule,omitempty" json:"schedule,omitempty" default:"constant"`
	// WarmupSteps is the number of first steps whose learning rate rises
	// linearly to lr.
	WarmupSteps int `yaml:"warmup_steps,omitempty" json:"warmup_steps,omitempty"`
	// MinLRRatio is the last step's learning rate under the linear and cosine
	// schedules, as a fraction of lr, in [0, 1].
	MinLRRatio float64 `yaml:"min_lr_ratio,omitempty" json:"min_lr_ratio,omitempty"`
}

// Sampling are the rollout sampling settings.
type Sampling struct {
	// Temperature divides the logits before sampling; 0 means greedy decoding
	// (always the most likely token).
	Temperature *float64 `yaml:"temperature,omitempty" json:"temperature,omitempty" default:"1"`
	// TopP is nucleus sampling: keep the smallest set of tokens whose
	// probability reaches top_p; in (0, 1], 1 keeps every token.
	TopP float64 `yaml:"top_p,omitempty" json:"top_p,omitempty" default:"1"`
	// TopK keeps the k most likely tokens; 0 keeps every token.
	TopK int `yaml:"top_k,omitempty" json:"top_k,omitempty"`
	// MaxNewTokens is the longest response in tokens (> 0); a longer one is
	// cut there and counts as truncated.
	MaxNewTokens int `yaml:"max_new_tokens,omitempty" json:"max_new_tokens,omitempty"`
	// MaxBatch is the most responses decoded at once (as vLLM's
	// max_num_seqs); a sequence that ends gives its place to the next. It
	// bounds the key/value cache and changes memory and speed, never the
	// responses. 0 takes as many as fit a 2 GiB cache, at least 16.
	MaxBatch int `yaml:"max_batch,omitempty" json:"max_batch,omitempty"`
}

// Eval is the evaluation schedule.
type Eval struct {
	// Every is the number of steps between evaluations; 0 evaluates only at
	// the start and after the last step (which is always evaluated).
	Every int `yaml:"every,omitempty" json:"every,omitempty"`
	// AtStart evaluates the initial agents before the first step.
	AtStart *bool `yaml:"at_start,omitempty" json:"at_start,omitempty" default:"true"`
	// Sets are the evaluation sets; each agent is evaluated alone on each.
	Sets []EvalSet `yaml:"sets,omitempty" json:"sets,omitempty"`
}

// EvalSet is one evaluation set and protocol. Greedy accuracy is always
// measured; samples adds avg@k, pass@k and maj@k.
type EvalSet struct {
	// Name labels the set's metrics (eval/<name>/...); unique.
	Name string `yaml:"name,omitempty" json:"name,omitempty" derived:"the benchmark, the dataset file's base name, or the split"`
	// Split is a split of the run's own task: test or train. Give exactly one
	// of split, benchmark or dataset.
	Split string `yaml:"split,omitempty" json:"split,omitempty" derived:"test, when neither benchmark nor dataset is given"`
	// Benchmark is a shared math benchmark by name, e.g. gsm8k.
	Benchmark string `yaml:"benchmark,omitempty" json:"benchmark,omitempty"`
	// Dataset is a JSONL or Parquet file of problems.
	Dataset string `yaml:"dataset,omitempty" json:"dataset,omitempty"`
	// Problems is how many problems to evaluate (the first ones); 0 takes all
	// of a benchmark or dataset, and a generated task's split needs a number.
	Problems int `yaml:"problems,omitempty" json:"problems,omitempty"`
	// Samples is k, the responses sampled per problem for avg@k, pass@k and
	// maj@k; 0 measures greedy accuracy only.
	Samples int `yaml:"samples,omitempty" json:"samples,omitempty"`
	// Temperature is the temperature of the k samples (> 0: greedy accuracy is
	// measured anyway).
	Temperature float64 `yaml:"temperature,omitempty" json:"temperature,omitempty" default:"1"`
	// MaxNewTokens is the longest response in tokens; 0 takes each agent's
	// sampling.max_new_tokens.
	MaxNewTokens int `yaml:"max_new_tokens,omitempty" json:"max_new_tokens,omitempty"`
	// PromptSuffix is appended to every question of a benchmark or dataset
	// set, after a space, as dataset.prompt_suffix is to training questions
	// (the paper evaluates with its \boxed{} instruction too); not with
	// split, whose questions already carry dataset.prompt_suffix.
	PromptSuffix string `yaml:"prompt_suffix,omitempty" json:"prompt_suffix,omitempty"`
	// Task changes options of the run's generated task for this split set:
	// the options it sets replace the run's, the others stay, e.g.
	// {operators: "+"} evaluates an arith run on its addition problems only.
	// Its name may be left out (it must be the run's). A problem's split
	// depends only on its text, so the set's test problems are never the
	// run's training problems. Only with split, and only for a task (not a
	// dataset).
	Task *Task `yaml:"task,omitempty" json:"task,omitempty"`
}

// Checkpoint is the checkpoint schedule.
type Checkpoint struct {
	// Every is the number of steps between checkpoints; 0 saves only the last
	// step (always saved) and the step an interrupted run stopped at.
	Every int `yaml:"every,omitempty" json:"every,omitempty"`
	// Keep is how many step checkpoints to keep (≥ 1); older ones are deleted.
	Keep int `yaml:"keep,omitempty" json:"keep,omitempty" default:"2"`
}

// Rollouts is the schedule of the readable rollout logs: every agent's sampled
// responses of a step, with their rewards and what each learner made of them,
// as gzip-compressed JSONL in OUT/rollouts/step-NNNNNNNN.jsonl.gz (the format is
// rollout.Record; `hacrl rollouts OUT --step S` prints them).
type Rollouts struct {
	// Every writes the rollouts of every step s with s % every == 0, where s
	// counts completed steps from 1 as in metrics.jsonl (every: 1 logs every
	// step); 0, the default, writes none.
	Every int `yaml:"every,omitempty" json:"every,omitempty"`
}

// Tracking names the experiment trackers a run logs its metrics to, besides
// OUT/metrics.jsonl and the TensorBoard files in OUT/tb.
type Tracking struct {
	// MLflow logs every metric, the method and seed as params, and the
	// run's status to an MLflow tracking server (package tracking/mlflow).
	MLflow *MLflow `yaml:"mlflow,omitempty" json:"mlflow,omitempty"`
}

// MLflow is an MLflow tracking server and where a run goes in it. A server
// that is down or slow never stops training: the metrics wait for it
// (retried with backoff), and what could not be logged by the end is
// reported in the run's log.
type MLflow struct {
	// URI is the tracking server, e.g. http://127.0.0.1:5000. Required.
	URI string `yaml:"uri,omitempty" json:"uri,omitempty"`
	// Experiment is the experiment's name; it is created when missing.
	Experiment string `yaml:"experiment,omitempty" json:"experiment,omitempty" derived:"the config's name, else hacrl"`
	// RunName is the MLflow run's name. A run resumed with --resume goes on
	// logging to the MLflow run it started (OUT/mlflow.json names it).
	RunName string `yaml:"run_name,omitempty" json:"run_name,omitempty" derived:"OUT's base name"`
	// TokenEnv names an environment variable holding a bearer token sent as
	// "Authorization: Bearer …" with every request; the token itself never
	// goes in the config.
	TokenEnv string `yaml:"token_env,omitempty" json:"token_env,omitempty"`
}

// validateTracking checks the tracking section.
func validateTracking(t *Tracking, bad func(path, format string, args ...any)) {
	m := t.MLflow
	if m == nil {
		return
	}
	if m.URI == "" {
		bad("tracking.mlflow.uri", "required: the tracking server, e.g. http://127.0.0.1:5000")
	} else if u, err := url.Parse(m.URI); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("tracking.mlflow.uri", "must be http://HOST[:PORT] or https://…, got %q", m.URI)
	}
	if m.TokenEnv != "" && !envName.MatchString(m.TokenEnv) {
		bad("tracking.mlflow.token_env", "must be the name of an environment variable (letters, digits, _), got %q", m.TokenEnv)
	}
}

// Load reads, checks and fills in defaults for a config file, with the
// overrides sets applied to it (see Set).
func Load(path string, sets ...Set) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(data, sets...)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes YAML strictly, applies the overrides sets, applies defaults
// and validates. Only keys left out (or given no value) take defaults: a key
// given a value that its default would replace (top_p: 0) is an error naming
// its path and line (or its --set).
//
// The config keeps where each value came from, so that later checks of it
// (Validate, train.Resolve) name the line or the --set too (see Where); its
// Sets are the overrides' arguments.
func Parse(data []byte, sets ...Set) (*Config, error) {
	var c Config
	src, err := decodeStrict(data, &c, sets)
	if err != nil {
		return nil, err
	}
	c.src = src
	c.Sets = SetArgs(sets)
	c.applyDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// decodeStrict decodes a YAML document into v (a pointer to a config struct)
// after applying sets and checkKeys, and returns where every key came from.
func decodeStrict(data []byte, v any, sets []Set) (*source, error) {
	var root yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&root); err != nil && !(errors.Is(err, io.EOF) && len(sets) > 0) {
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	src := &source{lines: map[string]int{}, sets: sets}
	if len(sets) > 0 {
		if err := src.apply(&root); err != nil {
			return nil, err
		}
	}
	if err := checkKeys(&root, reflect.TypeOf(v).Elem(), "", src); err != nil {
		return nil, err
	}
	if err := root.Decode(v); err != nil {
		return nil, err
	}
	return src, nil
}

// Equal reports whether c and o hold the same values (and the same Sets),
// wherever the values came from: the lines that Where cites are left out.
// Two parses of the same config in different layouts are Equal.
func (c *Config) Equal(o *Config) bool {
	x, y := *c, *o
	x.src, y.src = nil, nil
	return reflect.DeepEqual(x, y)
}

// Where names the key at path for a message about its value: "path (line
// N)" with the line of the file that gives it (or, for a key the file leaves
// out, its nearest parent's), "--set KEY=VALUE" when an override set it, or
// the path alone for a config that was not parsed from a file. Checks made
// after Parse (train.Resolve's) write their errors as Where(path) + ": " +
// what is expected.
func (c *Config) Where(path string) string { return c.src.where(path) }

// applyDefaults fills what was left unset: the literal defaults of the
// fields' default tags, then the defaults derived from other fields.
func (c *Config) applyDefaults() {
	fillDefaults(reflect.ValueOf(c).Elem())
	if c.Batch.MicroBatch == 0 {
		c.Batch.MicroBatch = c.Batch.MiniBatch
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
	}
	for i := range c.Agents {
		a := &c.Agents[i]
		// An agent from a checkpoint keeps an empty kind: the checkpoint's
		// template (train resolves it).
		if a.Template.Kind == "" && a.Model != nil {
			a.Template.Kind = "plain"
		}
		if a.Model != nil {
			a.Model.applyDefaults()
		}
		if l := a.LoRA; l != nil {
			if l.Alpha == 0 {
				l.Alpha = 2 * float64(l.Rank)
			}
			if len(l.TargetModules) == 0 {
				l.TargetModules = Modules{AllLinear}
			}
		}
	}
}

// applyDefaults fills a new model's sizes derived from the others.
func (m *NewModel) applyDefaults() {
	if m.KVHeads == 0 {
		m.KVHeads = m.Heads
	}
	if m.Hidden == 0 {
		if m.Family == "llama" {
			m.Hidden = LlamaHidden(m.Dim)
		} else {
			m.Hidden = 4 * m.Dim
		}
	}
	if m.Activation == "" {
		if m.Family == "llama" {
			m.Activation = "silu"
		} else {
			m.Activation = "gelu"
		}
	}
}

func baseName(p string) string {
	if i := strings.LastIndexAny(p, `/\`); i >= 0 {
		return p[i+1:]
	}
	return p
}

// badFunc records a problem with the setting at a key path.
type badFunc func(path, format string, args ...any)

// collector returns a badFunc that appends to errs, naming each path's
// place (see source.where).
func collector(errs *[]error, src *source) badFunc {
	return func(path, format string, args ...any) {
		*errs = append(*errs, fmt.Errorf("%s: "+format, append([]any{src.where(path)}, args...)...))
	}
}

func lineOf(lines map[string]int, path string) int {
	for p := path; p != ""; {
		if l, ok := lines[p]; ok {
			return l
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return 0
}

// Validate reports every impossible setting, each by its key path and,
// for a parsed config, its line or --set (changes made since, such as
// --steps, are named by the key path alone when the file does not give
// the key).
func (c *Config) Validate() error { return c.validate() }

// AgentNames returns the names of c's agents, in config order.
func (c *Config) AgentNames() []string {
	names := make([]string, len(c.Agents))
	for i, a := range c.Agents {
		names[i] = a.Name
	}
	return names
}

func (c *Config) validate() error {
	var errs []error
	bad := collector(&errs, c.src)
	if c.Steps < 0 {
		bad("steps", "must be >= 0, got %d", c.Steps)
	}
	if (c.Task == nil) == (c.Dataset == nil) {
		bad("task", "give exactly one of task or dataset")
	}
	if c.Task != nil {
		validateTask("task", c.Task, bad)
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
	positive(bad, c.src, "batch.prompts_per_step", b.PromptsPerStep, "prompts drawn each step")
	if b.ResponsesPerPrompt <= 0 {
		bad("batch.responses_per_prompt", "must be > 0, got %d", b.ResponsesPerPrompt)
	}
	positive(bad, c.src, "batch.mini_batch", b.MiniBatch, "sequences per optimizer update")
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
			validateModel(p+".model", a.Model, bad, c.src)
			if a.Tokenizer == "" {
				bad(p+".tokenizer", "required with a new model (path of a tokenizer.json)")
			}
		}
		// An empty kind is left for an agent from a checkpoint: its template.
		validateTemplate(p+".template", a.Template, a.Model != nil, bad)
		validateOptimizer(p+".optimizer", a.Optimizer, bad, c.src)
		s := a.Sampling
		if s.Temperature != nil && !(*s.Temperature >= 0 && !math.IsInf(*s.Temperature, 0)) {
			bad(p+".sampling.temperature", "must be >= 0 (0 = greedy), got %g", *s.Temperature)
		}
		if !(s.TopP > 0 && s.TopP <= 1) {
			bad(p+".sampling.top_p", "must be in (0, 1], got %g", s.TopP)
		}
		if s.TopK < 0 {
			bad(p+".sampling.top_k", "must be >= 0 (0 = off), got %d", s.TopK)
		}
		positive(bad, c.src, p+".sampling.max_new_tokens", s.MaxNewTokens, "the longest response in tokens")
		if s.MaxBatch < 0 {
			bad(p+".sampling.max_batch", "must be >= 0 (0 = as many as fit a 2 GiB cache), got %d", s.MaxBatch)
		}
		if a.LoRA != nil {
			validateLoRA(p+".lora", a.LoRA, bad, c.src)
		}
		if a.Rollout != nil {
			validateRollout(p+".rollout", a.Rollout, bad)
		}
		switch a.ComputeDType {
		case "float32":
		case "bfloat16":
			if c.Engine == "native" {
				bad(p+".compute_dtype", "bfloat16 runs on the graph engine; engine native computes in float32 (set engine to auto or graph)")
			}
		default:
			bad(p+".compute_dtype", "must be float32 or bfloat16, got %q", a.ComputeDType)
		}
		switch a.FrozenDType {
		case "float32":
		case "bfloat16":
			switch {
			case a.LoRA == nil:
				bad(p+".frozen_dtype", "bfloat16 holds a LoRA agent's frozen base and needs a lora section (a fully fine-tuned agent trains every weight)")
			case c.Engine == "graph" || a.ComputeDType == "bfloat16":
				bad(p+".frozen_dtype", "bfloat16 runs on the native engine (engine auto or native, compute_dtype float32)")
			}
		default:
			bad(p+".frozen_dtype", "must be float32 or bfloat16, got %q", a.FrozenDType)
		}
		switch a.SampleDType {
		case "float32":
		case "bfloat16":
			switch {
			case c.Engine == "graph" || a.ComputeDType == "bfloat16":
				bad(p+".sample_dtype", "bfloat16 runs on the native engine (engine auto or native, compute_dtype float32)")
			case a.Rollout.Remote():
				bad(p+".sample_dtype", "only with in-process rollouts: with rollout.engine openai the server samples")
			}
		default:
			bad(p+".sample_dtype", "must be float32 or bfloat16, got %q", a.SampleDType)
		}
	}
	validateMethod(c.Method, bad)
	if s, err := hacpo.Preset(c.Method.Name); err == nil && s.SharesRollouts && len(c.Agents) == 1 {
		bad("agents", "method %s shares rollouts between agents and needs at least 2, got 1", s.Method)
	}
	switch c.Method.Capability {
	case "accuracy", "mean_reward":
	default:
		bad("method.capability", "must be accuracy or mean_reward, got %q", c.Method.Capability)
	}
	switch c.Method.CrossAdvantage {
	case "", "all", "positive", "capable":
	default:
		bad("method.cross_advantage", "must be all, positive or capable, got %q", c.Method.CrossAdvantage)
	}
	switch c.Method.CrossBounds {
	case "fixed", "adaptive", "decoupled":
	default:
		bad("method.cross_bounds", "must be fixed, adaptive or decoupled, got %q", c.Method.CrossBounds)
	}
	if m := c.Method.ResponsesMultiplier; m < 0 {
		bad("method.responses_multiplier", "must be >= 1 (0 or absent: the preset's), got %d", m)
	}
	switch c.Method.Semantics {
	case "", "v1":
	case "original":
		if c.Method.LossAgg != nil {
			bad("method.loss_agg", "semantics original fixes the loss aggregation (hacpo/doc.go decision 26): leave loss_agg out")
		}
		if c.Batch.MiniBatch > 0 && c.Batch.MiniBatch%8 != 0 {
			bad("method.semantics", "original splits each mini-batch over 8 ranks: batch.mini_batch must be a multiple of 8, got %d", c.Batch.MiniBatch)
		}
	default:
		bad("method.semantics", "must be v1 or original, got %q", c.Method.Semantics)
	}
	switch c.OnNonFinite {
	case "skip", "stop":
	default:
		bad("on_non_finite", "must be skip or stop, got %q", c.OnNonFinite)
	}
	checkEngine(bad, c.Engine)
	if c.Eval.Every < 0 {
		bad("eval.every", "must be >= 0, got %d", c.Eval.Every)
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
		if s.Benchmark != "" && !slices.Contains(dataset.Benchmarks(), s.Benchmark) {
			bad(p+".benchmark", "unknown benchmark %q; valid: %s", s.Benchmark, strings.Join(dataset.Benchmarks(), ", "))
		}
		if s.Split != "" && c.Task != nil && s.Problems == 0 {
			bad(p+".problems", "required for a generated task's split (how many of its endless problems to evaluate)")
		}
		if s.Problems < 0 {
			bad(p+".problems", "must be >= 0 (0 = all), got %d", s.Problems)
		}
		if s.Samples < 0 {
			bad(p+".samples", "must be >= 0 (0 = greedy accuracy only), got %d", s.Samples)
		}
		if s.Samples > 0 && !(s.Temperature > 0 && !math.IsInf(s.Temperature, 0)) {
			bad(p+".temperature", "must be > 0 for samples (greedy accuracy is measured anyway), got %g", s.Temperature)
		}
		if s.PromptSuffix != "" && s.Split != "" {
			bad(p+".prompt_suffix", "only with benchmark or dataset: a split's questions carry dataset.prompt_suffix")
		}
		if s.Task != nil {
			validateEvalTask(p+".task", s, c.Task, bad)
		}
		if s.MaxNewTokens < 0 {
			bad(p+".max_new_tokens", "must be >= 0 (0 = the agent's), got %d", s.MaxNewTokens)
		}
		if setNames[s.Name] {
			bad(p+".name", "%q is used twice", s.Name)
		}
		setNames[s.Name] = true
	}
	if c.Checkpoint.Every < 0 {
		bad("checkpoint.every", "must be >= 0 (0 = only the last step), got %d", c.Checkpoint.Every)
	}
	if c.Checkpoint.Keep < 1 {
		bad("checkpoint.keep", "must be >= 1, got %d", c.Checkpoint.Keep)
	}
	if c.Tracking != nil {
		validateTracking(c.Tracking, bad)
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

// validateTask checks a generated task's section: its name, and that it sets
// no option of another task (the options' ranges are the task's to check).
func validateTask(path string, t *Task, bad badFunc) {
	switch t.Name {
	case "":
		bad(path+".name", "required (arith or countdown)")
		return
	default:
		if !slices.Contains(task.Names(), t.Name) {
			bad(path+".name", "unknown task %q; valid: %s", t.Name, strings.Join(task.Names(), ", "))
			return
		}
	}
	v := reflect.ValueOf(t).Elem()
	other := false
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if owner := f.Tag.Get("task"); owner != "" && owner != t.Name && !v.Field(i).IsZero() {
			bad(path+"."+yamlName(f), "is an option of %s, not of %s", owner, t.Name)
			other = true
		}
	}
	if other {
		return
	}
	// The ranges are the task's: ask it.
	_, err := task.New(t.Name, t.Options())
	var oe *task.OptionError
	switch {
	case errors.As(err, &oe):
		bad(path+"."+oe.Option, "%s", oe.Reason)
	case err != nil:
		bad(path, "%v", err)
	}
}

// validateEvalTask checks an evaluation set's task section (path): only on
// a split of a run's generated task (run), naming that task or none, and
// setting only that task's options.
func validateEvalTask(path string, s EvalSet, run *Task, bad badFunc) {
	switch {
	case s.Split == "":
		bad(path, "only with split: it changes the options of the run's own task")
	case run == nil:
		bad(path, "only for a run with a generated task (task), not a dataset")
	case s.Task.Name != "" && s.Task.Name != run.Name:
		bad(path+".name", "must be the run's task (%s) or left out, got %q", run.Name, s.Task.Name)
	default:
		t := *s.Task
		t.Name = run.Name
		validateTask(path, &t, bad)
	}
}

// Override returns a copy of t with the options that o sets (its non-zero
// fields) in place of t's: the task of an evaluation set with a task section
// (EvalSet.Task). Since a zero option counts as unset, o cannot turn
// fractions off.
func (t Task) Override(o *Task) Task {
	if o == nil {
		return t
	}
	tv, ov := reflect.ValueOf(&t).Elem(), reflect.ValueOf(o).Elem()
	for i := 0; i < ov.NumField(); i++ {
		if !ov.Field(i).IsZero() {
			tv.Field(i).Set(ov.Field(i))
		}
	}
	return t
}

// Options are the task package's options of the generated task t
// describes (task.New(t.Name, t.Options()) makes it).
func (t *Task) Options() task.Options {
	return task.Options{
		Seed: t.Seed, FormatWeight: t.FormatWeight,
		Digits: t.Digits, Ops: t.Ops, Operators: t.Operators, MulDigits: t.MulDigits,
		Numbers: t.Numbers, MaxNumber: t.MaxNumber, MaxTarget: t.MaxTarget, Fractions: t.Fractions,
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
func validateModel(path string, m *NewModel, bad badFunc, src *source) {
	if m.Family != "gpt" && m.Family != "llama" {
		bad(path+".family", "must be gpt or llama, got %q", m.Family)
	}
	for _, f := range []struct {
		key string
		v   int
	}{{"dim", m.Dim}, {"layers", m.Layers}, {"heads", m.Heads}} {
		positive(bad, src, path+"."+f.key, f.v, "")
	}
	if m.Dim > 0 && m.Layers > 0 && m.Heads > 0 && m.HeadDim == 0 && m.Dim%m.Heads != 0 {
		bad(path+".heads", "must divide dim (%d), got %d (or set head_dim)", m.Dim, m.Heads)
	}
	validateLlamaOptions(path, m, bad)
	if m.KVHeads <= 0 || (m.Heads > 0 && m.Heads%m.KVHeads != 0) {
		bad(path+".kv_heads", "must divide heads (%d), got %d", m.Heads, m.KVHeads)
	}
	if m.Hidden <= 0 {
		bad(path+".hidden", "must be > 0, got %d", m.Hidden)
	}
	positive(bad, src, path+".max_seq", m.MaxSeq, "the context length in tokens")
}

// validateLlamaOptions checks a new model's llama-family options:
// model_type, head_dim, rope_theta and rope_scaling.
func validateLlamaOptions(path string, m *NewModel, bad badFunc) {
	if m.Family != "llama" {
		for _, o := range []struct {
			key string
			set bool
		}{{"model_type", m.ModelType != ""}, {"head_dim", m.HeadDim != 0}, {"rope_theta", m.RopeTheta != 0}, {"rope_scaling", m.RopeScaling != nil}} {
			if o.set {
				bad(path+"."+o.key, "applies to family llama only, not %q", m.Family)
			}
		}
		return
	}
	if m.ModelType != "" && m.ModelType != "llama" && m.ModelType != "qwen2" && m.ModelType != "qwen3" {
		bad(path+".model_type", "must be llama, qwen2 or qwen3, got %q", m.ModelType)
	}
	if m.HeadDim < 0 || m.HeadDim%2 != 0 {
		bad(path+".head_dim", "must be even and > 0 (rotary positions), got %d", m.HeadDim)
	}
	if m.RopeTheta < 0 {
		bad(path+".rope_theta", "must be > 0, got %g", m.RopeTheta)
	}
	if s := m.RopeScaling; s != nil {
		p := path + ".rope_scaling"
		switch {
		case s.RopeType != "llama3":
			bad(p+".rope_type", "must be llama3, got %q", s.RopeType)
		case !(s.Factor > 0):
			bad(p+".factor", "must be > 0, got %g", s.Factor)
		case !(s.LowFreqFactor > 0):
			bad(p+".low_freq_factor", "must be > 0, got %g", s.LowFreqFactor)
		case !(s.HighFreqFactor > s.LowFreqFactor):
			bad(p+".high_freq_factor", "must be > low_freq_factor (%g), got %g", s.LowFreqFactor, s.HighFreqFactor)
		case s.OriginalMaxPositionEmbeddings <= 0:
			bad(p+".original_max_position_embeddings", "must be > 0, got %d", s.OriginalMaxPositionEmbeddings)
		}
	}
}

// validateLoRA checks an agent's lora section with defaults applied.
func validateLoRA(path string, l *LoRA, bad badFunc, src *source) {
	positive(bad, src, path+".rank", l.Rank, "the adapters' inner dimension, e.g. 16")
	if !(l.Alpha > 0) {
		bad(path+".alpha", "must be > 0, got %g", l.Alpha)
	}
	if l.Dropout != 0 {
		bad(path+".dropout", "must be 0 (adapter dropout is not implemented), got %g", l.Dropout)
	}
	for i, name := range l.TargetModules {
		switch {
		case name == AllLinear && len(l.TargetModules) > 1:
			bad(fmt.Sprintf("%s.target_modules[%d]", path, i), "%s adapts every linear layer: give it alone, not in a list with others", AllLinear)
		case name == AllLinear, slices.Contains(LoRAModules, name):
		case strings.Contains(name, "."): // a full module path, checked against the model when it loads
		default:
			bad(fmt.Sprintf("%s.target_modules[%d]", path, i), "must be one of %s, a full module path, or %s, got %q",
				strings.Join(LoRAModules, ", "), AllLinear, name)
		}
	}
}

// validateOptimizer checks an optimizer section with defaults applied.
func validateOptimizer(path string, o Optimizer, bad badFunc, src *source) {
	switch {
	case o.LR == 0 && !src.given(path+".lr"):
		bad(path+".lr", "required (> 0): the peak learning rate, e.g. 1e-5")
	case !(o.LR > 0):
		bad(path+".lr", "must be > 0, got %g", o.LR)
	}
	if o.WeightDecay != nil && !(*o.WeightDecay >= 0) {
		bad(path+".weight_decay", "must be >= 0 (0 = off), got %g", *o.WeightDecay)
	}
	if !(o.Beta1 > 0 && o.Beta1 < 1) {
		bad(path+".beta1", "must be in (0, 1), got %g", o.Beta1)
	}
	if !(o.Beta2 > 0 && o.Beta2 < 1) {
		bad(path+".beta2", "must be in (0, 1), got %g", o.Beta2)
	}
	if !(o.Epsilon > 0) {
		bad(path+".epsilon", "must be > 0, got %g", o.Epsilon)
	}
	if o.MaxGradNorm != nil && !(*o.MaxGradNorm >= 0) {
		bad(path+".max_grad_norm", "must be >= 0 (0 = no clipping), got %g", *o.MaxGradNorm)
	}
	switch o.Schedule {
	case "constant", "linear", "cosine":
	default:
		bad(path+".schedule", "must be constant, linear or cosine, got %q", o.Schedule)
	}
	if o.WarmupSteps < 0 {
		bad(path+".warmup_steps", "must be >= 0, got %d", o.WarmupSteps)
	}
	if !(o.MinLRRatio >= 0 && o.MinLRRatio <= 1) {
		bad(path+".min_lr_ratio", "must be in [0, 1], got %g", o.MinLRRatio)
	}
}

// positive reports an integer setting at path that must be > 0: one left
// out (0, not given) is required, what being a short description of it.
func positive(bad badFunc, src *source, path string, v int, what string) {
	switch {
	case v == 0 && !src.given(path) && what != "":
		bad(path, "required (> 0): %s", what)
	case v == 0 && !src.given(path):
		bad(path, "required (> 0)")
	case v <= 0:
		bad(path, "must be > 0, got %d", v)
	}
}

// validateMethod checks the method's preset name and the ranges of the
// hyperparameters the config sets (the preset's own are hacpo's to check).
func validateMethod(m Method, bad badFunc) {
	if names := hacpo.PresetNames(); !slices.Contains(names, strings.ToLower(strings.TrimSpace(m.Name))) {
		bad("method.name", "unknown method %q; valid: %s", m.Name, strings.Join(names, ", "))
	}
	for _, f := range []struct {
		key    string
		v      *float64
		ok     func(float64) bool
		expect string
	}{
		{"alpha", m.Alpha, func(x float64) bool { return x >= 0 }, ">= 0"},
		{"delta", m.Delta, func(x float64) bool { return x >= 0 && x <= 1 }, "in [0, 1]"},
		{"delta_step", m.DeltaStep, func(x float64) bool { return x >= 0 }, ">= 0"},
		{"clip_low", m.ClipLow, func(x float64) bool { return x >= 0 && x <= 1 }, "in [0, 1) (1, no lower bound, with self_rule cispo)"},
		{"entropy_coef", m.EntropyCoef, func(x float64) bool { return x >= 0 }, ">= 0 (0 = no entropy bonus)"},
		{"overlong_penalty", m.OverlongPenalty, func(x float64) bool { return x >= 0 }, ">= 0 (0 = off)"},
		{"rollout_is_cap", m.RolloutISCap, func(x float64) bool { return x >= 1 }, ">= 1"},
		{"clip_high", m.ClipHigh, func(x float64) bool { return x >= 0 }, ">= 0"},
		{"kl_coef", m.KLCoef, func(x float64) bool { return x >= 0 }, ">= 0 (0 = no KL term)"},
		{"omega_min", m.OmegaMin, func(x float64) bool { return x > 0 }, "> 0"},
		{"omega_max", m.OmegaMax, func(x float64) bool { return x > 0 }, "> 0"},
	} {
		if f.v != nil && !(f.ok(*f.v) && !math.IsInf(*f.v, 0)) {
			bad("method."+f.key, "must be %s, got %g", f.expect, *f.v)
		}
	}
	if m.OmegaMin != nil && m.OmegaMax != nil && *m.OmegaMax < *m.OmegaMin {
		bad("method.omega_max", "must be >= omega_min (%g), got %g", *m.OmegaMin, *m.OmegaMax)
	}
	if m.Window != nil && *m.Window < 1 {
		bad("method.window", "must be >= 1, got %d", *m.Window)
	}
	if m.WarmupSteps != nil && *m.WarmupSteps < 0 {
		bad("method.warmup_steps", "must be >= 0, got %d", *m.WarmupSteps)
	}
	for _, f := range []struct {
		key   string
		v     *string
		valid []string
	}{
		{"loss_agg", m.LossAgg, []string{"seq-mean-token-mean", "token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"}},
		{"advantage_std", m.AdvantageStd, []string{"group", "batch", "none"}},
		{"self_rule", m.SelfRule, []string{"ppo", "cispo"}},
		{"kl_estimator", m.KLEstimator, []string{"k1", "k2", "k3"}},
		{"rollout_is", m.RolloutIS, []string{"off", "token", "sequence", "geometric"}},
	} {
		if f.v != nil && !slices.Contains(f.valid, *f.v) {
			bad("method."+f.key, "must be one of %s, got %q", strings.Join(f.valid, ", "), *f.v)
		}
	}
	if m.AdvantageStd != nil && m.NormalizeStd != nil && (*m.AdvantageStd == "none") == *m.NormalizeStd {
		bad("method.advantage_std", "%s contradicts normalize_std: %v (advantage_std none is normalize_std false); give one of them", *m.AdvantageStd, *m.NormalizeStd)
	}
	if m.OverlongBuffer != nil && *m.OverlongBuffer < 1 {
		bad("method.overlong_buffer", "must be >= 1 token, got %d", *m.OverlongBuffer)
	}
	if m.MaxSampleRounds != nil && *m.MaxSampleRounds < 1 {
		bad("method.max_sample_rounds", "must be >= 1, got %d", *m.MaxSampleRounds)
	}
}
