// Package train runs collaborative RL: N heterogeneous agents trained together
// on one verifiable task with HACPO or a baseline, as one synchronous loop.
//
// One step (../shared/docs/hacpo-paper.md §2.7; architecture.md):
//
//  1. draw B prompts (seeded, position-indexed: a resumed run draws the same);
//  2. every agent samples G responses per prompt (G·2 for GSPO×2) with its own
//     model, tokenizer and template; the verifier scores them (or the
//     config's external reward, every agent's responses in one request),
//     less DAPO's overlong penalty when the method has one; under dynamic
//     sampling, prompts whose rewards teach nothing are dropped and more
//     rounds sampled (dynamic.go);
//  3. every agent scores its own responses: the old log-probs (before any update);
//  4. the capability tracker takes each agent's step accuracy (window K);
//  5. for each learner in turn: its view of the pool (others' responses
//     re-tokenized), advantages with its capability-weighted baseline, then
//     mini-batch updates, self samples first, each a forward pass for the
//     current log-probs, the loss and per-token gradient weights from package
//     hacpo, and a backward pass with AdamW.
//
// Single-agent methods (GRPO, GSPO, GSPO×2) run through the same loop with
// sharing off: every agent trains alone on its own responses.
//
// A run writes OUT/metrics.jsonl (and TensorBoard files; with
// tracking.mlflow it also logs them to an MLflow server, tracking.go) and, when
// rollouts.every is set, each logged step's rollouts with what every learner
// made of them (OUT/rollouts, rollout.Record), evaluates on held-out sets on a
// schedule, and checkpoints atomically: all agents' weights
// and optimizer states, the capability window and the step. Every random draw
// is derived from (seed, step, agent, purpose), so there is no RNG state to
// save and a run killed at any moment and resumed reproduces an uninterrupted
// run's metrics bit for bit (timing metrics aside).
//
// OUT belongs to one run (rundir.go): a run holds its lock from New to the
// end of Train, starts only in an empty OUT unless told to overwrite it, and
// writes nothing there until its setup has succeeded. A checkpoint records
// the training-relevant config and its hash (confighash.go), which a resume
// must match; a damaged latest checkpoint gives way to the previous intact one.
package train

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gomlx/compute"
	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/hacpo"
	"github.com/hacrl/hacrl/internal/atomicfile"
	"github.com/hacrl/hacrl/internal/runlock"
	"github.com/hacrl/hacrl/metrics"
	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/reward"
	"github.com/hacrl/hacrl/rollout"
	"github.com/hacrl/hacrl/tracking/mlflow"
)

// Observer receives progress: the CLI draws it live or logs it.
type Observer interface {
	// Phase says agent has started phase (sample, score, update, push weights, eval, checkpoint) of a step.
	Phase(step int, agent, phase string)
	// Step says a step finished, with its wall time and, by agent name, the
	// numbers of each of this process's agents (see stepSummary).
	Step(step, total int, elapsed time.Duration, agents map[string]string)
	// Log is a message for the user. It may come from another goroutine
	// (the MLflow tracker's, tracking.go).
	Log(msg string)
}

// Options are the run's command-line overrides.
type Options struct {
	Resume bool // continue from OUT's latest intact checkpoint
	// Overwrite lets a new run start in an OUT that holds an earlier run,
	// which it deletes once its own setup has succeeded (see rundir.go for
	// the directories it refuses to empty). Not with Resume.
	Overwrite bool
	Observer  Observer
	// Member, when set, makes this process one agent's process of a run
	// whose agents are separate processes (exchange.go): it trains only
	// Member.Agent, in its own OUT, and shares each step's rollouts with
	// the others through Member.Exchange. A member stops when the run's
	// agents agree to (see Train), not when its context is cancelled.
	Member *Member
}

// Run is a training run in progress.
type Run struct {
	cfg     *config.Config
	backend compute.Backend
	agents  []*Agent // the agents this process trains: all, or a member's one
	names   []string // every agent of the config, in order (Agent.Index)
	tokSums []string // every agent's tokenizer sum (tokenizerSums), for the cross diagnostics
	member  *Member  // nil: every agent in this process
	algo    hacpo.Settings
	tracker *hacpo.CapabilityTracker
	data    *problems
	evals   []*evalSet
	reward  *reward.Client     // the external reward; nil: the task's own checker
	wide    map[string]float64 // the current step's run-wide metrics (time/step, time/reward, …)
	metrics *metrics.Writer
	mlflow  *mlflow.Tracker // config tracking.mlflow (tracking.go); nil: off
	obs     Observer
	start   int // steps already done
	seed    uint64
	// first and last evaluation, per set and agent, for the summary, and
	// their steps (−1: none yet, or unknown in an old checkpoint)
	firstEval, lastEval         map[string]map[string]float64
	firstEvalStep, lastEvalStep int

	lock     *runlock.Lock   // OUT's lock, held from New to the end of Train (or Close)
	trainCfg json.RawMessage // the training-relevant config (trainingConfig), stored in checkpoints
	damaged  []string        // damaged checkpoints passed over on resume, set aside by New
	complete bool            // resumed a run that had already done its steps
	readOnly error           // OUT cannot be written: no lock taken (only a complete run goes on)

	// interrupt is Train's context's Done: a member asks the others to stop
	// once it is closed; stoppedBy are the agents whose stop requests count
	// at the step the member last shared.
	interrupt <-chan struct{}
	stoppedBy []string

	// gradHook, when set (tests), may alter a mini-batch's gradient weights
	// before the backward pass: fault injection for the non-finite guard.
	gradHook func(step int, agent string, m int, grad [][]float32)
	// lossHook, when set (tests), sees each mini-batch's samples, loss and
	// gradient weights as the loss returned them (read only).
	lossHook func(step int, agent string, m int, samples []hacpo.Sample, loss hacpo.Loss, grad [][]float32)
}

// ErrInterrupted is returned by Train when the context was cancelled (wrapped,
// for a member process, when the run's agents agreed to stop); the run was
// checkpointed at the last completed step.
var ErrInterrupted = errors.New("interrupted")

// New prepares a run: agents, task, method, output directory; with
// opts.Resume it restores the latest intact checkpoint in cfg.Out. It takes
// OUT's lock, held until Train returns or Close. Until everything is ready,
// nothing in OUT is changed: a run that fails to start leaves it as it was.
func New(ctx context.Context, cfg *config.Config, opts Options) (_ *Run, err error) {
	if cfg.Out == "" {
		return nil, errors.New("train: config has no out directory (set out: or --out)")
	}
	if opts.Resume && opts.Overwrite {
		return nil, errors.New("train: --resume continues the run in the output directory and --overwrite deletes it: give one of them")
	}
	algo, err := methodSettings(cfg)
	if err != nil {
		return nil, err
	}
	if err := checkDynamic(algo, cfg, opts.Member); err != nil {
		return nil, err
	}
	if err := checkModelDirs(cfg); err != nil {
		return nil, err
	}
	if _, err := trackingToken(cfg); err != nil {
		return nil, err
	}
	if algo.SharesRollouts && len(cfg.Agents) < 2 {
		return nil, fmt.Errorf("%s: %s shares rollouts and needs at least 2 agents, got %d", cfg.Where("method.name"), algo.Method, len(cfg.Agents))
	}
	if opts.Member != nil {
		// The setup exchange runs to its end, interrupted or not: the other
		// processes wait for this one's part (see Train).
		ctx = context.WithoutCancel(ctx)
	}
	obs := opts.Observer
	if obs == nil {
		obs = logObserver{}
	}
	r := &Run{cfg: cfg, algo: algo, obs: obs, seed: uint64(cfg.Seed), firstEvalStep: -1, lastEvalStep: -1, member: opts.Member}
	r.names = cfg.AgentNames()
	r.tokSums = tokenizerSums(cfg)
	if m := opts.Member; m != nil && (m.Exchange == nil || !slices.Contains(r.names, m.Agent)) {
		return nil, fmt.Errorf("train: member process: agent %q is not one of the config's agents %v (or no exchange)", m.Agent, r.names)
	}
	if r.trainCfg, err = trainingConfig(cfg); err != nil {
		return nil, err
	}
	if err := r.lockOut(opts); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			r.lock.Release()
		}
	}()
	if err := r.buildInputs(); err != nil {
		return nil, err
	}
	ckpt, err := r.loadAgents(ctx, opts.Resume)
	if err != nil {
		return nil, err
	}
	if ckpt != nil && r.start >= cfg.Steps {
		// Nothing to train: leave OUT as it is (see Train).
		r.complete = true
		return r, nil
	}
	if r.readOnly != nil {
		return nil, fmt.Errorf("train: %s cannot be written (%w): a run continues only on writable storage (copy it there); --resume of a finished run only prints its table", cfg.Out, r.readOnly)
	}
	// Setup succeeded: from here on the run writes into OUT.
	if err := r.claimOut(opts.Overwrite, ckpt != nil); err != nil {
		return nil, err
	}
	return r, nil
}

// buildInputs makes what the agents train and are evaluated on: the task
// and its training problems, the external reward if any, the evaluation
// sets, and the compute backend.
func (r *Run) buildInputs() error {
	cfg := r.cfg
	t, err := BuildTask(cfg)
	if err != nil {
		return err
	}
	source := "task " + t.Name()
	if cfg.Dataset != nil {
		source = "dataset " + cfg.Dataset.Path
	}
	if r.data, err = newProblems(t, r.seed, source); err != nil {
		return err
	}
	if r.reward, err = newRewardClient(cfg, r.obs); err != nil {
		return err
	}
	if r.evals, err = buildEvalSets(cfg, t); err != nil {
		return err
	}
	choice := backend.Choose(cfg.Backend)
	if r.backend, err = backend.New(choice); err != nil && cfg.Backend != "" && choice == cfg.Backend {
		return fmt.Errorf("%s: %w", cfg.Where("backend"), err)
	}
	return err
}

// loadAgents loads every agent and, when resuming, the latest intact
// checkpoint over them (nil when there is none); then checks that every
// training and evaluation prompt fits each agent, gives each its frozen
// reference (when the KL term is on) and its engine. It writes nothing.
func (r *Run) loadAgents(ctx context.Context, resume bool) (*loaded, error) {
	cfg := r.cfg
	for i, ac := range cfg.Agents {
		if r.member != nil && ac.Name != r.member.Agent {
			continue
		}
		a, err := newAgent(r.backend, i, ac, r.rng(0, i, "lora").Int64(), false, r.obs.Log)
		if err != nil {
			return nil, err
		}
		a.Task = cfg.Task
		if a.isLoRA() && a.BaseDir == "" { // a new model's base: saved by claimOut
			if a.BaseDir, err = filepath.Abs(baseDir(cfg.Out, a.Name)); err != nil {
				return nil, err
			}
		}
		r.agents = append(r.agents, a)
	}
	var ckpt *loaded
	if resume {
		var err error
		if ckpt, err = r.findCheckpoint(); err != nil {
			return nil, err
		}
		if ckpt == nil {
			r.obs.Log(fmt.Sprintf("no checkpoint in %s: starting from step 0", cfg.Out))
		}
	}
	if ckpt != nil {
		r.restore(ckpt)
	} else {
		var err error
		if r.tracker, err = hacpo.NewCapabilityTracker(len(r.names), r.algo.Capability); err != nil {
			return nil, err
		}
	}
	if err := r.checkTrainFits(ctx); err != nil {
		return nil, err
	}
	if err := r.checkEvalFits(); err != nil {
		return nil, err
	}
	if r.algo.KLCoef > 0 {
		if err := r.setupReferences(r.backend, ckpt != nil); err != nil {
			return nil, err
		}
	}
	engine, err := model.ParseEngine(cfg.Engine)
	if err != nil {
		return nil, err
	}
	for _, a := range r.agents {
		a.Model.SetEngine(engine)
		if a.Ref != nil {
			a.Ref.SetEngine(engine)
		}
		if err := setComputeDType(a, cfg.Agents[a.Index].ComputeDType); err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.Where(fmt.Sprintf("agents[%d].compute_dtype", a.Index)), err)
		}
		// Before the bases are saved (saveBases): the saved base is the
		// rounded one the adapters train on.
		if err := a.Model.SetFrozenDType(cfg.Agents[a.Index].FrozenDType); err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.Where(fmt.Sprintf("agents[%d].frozen_dtype", a.Index)), err)
		}
		if err := a.Model.SetSampleDType(cfg.Agents[a.Index].SampleDType); err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.Where(fmt.Sprintf("agents[%d].sample_dtype", a.Index)), err)
		}
	}
	if err := r.setupRolloutEngines(); err != nil {
		return nil, err
	}
	return ckpt, nil
}

// claimOut writes the run's start into OUT, once setup has succeeded:
// empties it for --overwrite, sets damaged checkpoints aside, saves the
// reference models of a fresh run and the resolved config, drops rollout
// logs and metrics after the step the run starts from, and opens the
// metrics.
func (r *Run) claimOut(overwrite, resumed bool) error {
	cfg := r.cfg
	if overwrite {
		if err := clearOut(cfg.Out); err != nil {
			return err
		}
	}
	if err := r.setAsideDamaged(); err != nil {
		return err
	}
	if r.algo.KLCoef > 0 && !resumed {
		if err := r.saveReferences(); err != nil {
			return err
		}
	}
	if err := r.saveBases(); err != nil {
		return err
	}
	if err := writeResolvedConfig(cfg); err != nil {
		return err
	}
	if err := rollout.PruneLogs(cfg.Out, r.start); err != nil {
		return err
	}
	track, err := r.startTracking(resumed)
	if err != nil {
		return err
	}
	if r.metrics, err = metrics.Open(cfg.Out, r.start, track...); err != nil {
		r.endTracking(true, err)
	}
	return err
}

// lockOut creates OUT, takes its lock and checks that the run may use it: a
// new run needs an empty OUT, or Overwrite and an OUT that holds only a
// run's files.
func (r *Run) lockOut(opts Options) error { return r.lockOutFor(opts, false) }

// isReadOnly reports whether err is a file system's refusal to write.
func isReadOnly(err error) bool {
	return errors.Is(err, syscall.EROFS) || errors.Is(err, fs.ErrPermission)
}

// lockOutFor is lockOut for a run in one process (processes false) or the
// supervisor of a run of agent processes (ClaimOut).
func (r *Run) lockOutFor(opts Options, processes bool) error {
	out := r.cfg.Out
	if opts.Overwrite {
		if err := checkOverwriteTarget(out); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	lock, err := runlock.Acquire(out)
	if err != nil && opts.Resume && !processes && isReadOnly(err) {
		// A run on read-only storage can be looked at, not continued: New
		// lets only a finished one through, to print its table.
		r.readOnly = err
		return checkRunKind(out, processes)
	}
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	if lock.Stale != nil {
		r.obs.Log(fmt.Sprintf("%s: the previous run (%s) ended without releasing its lock; taking it over", out, lock.Stale))
	}
	check := func() error { return checkRunKind(out, processes) }
	if !opts.Resume {
		check = func() error { return checkNewRun(out, opts.Overwrite) }
	}
	if err := check(); err != nil {
		lock.Release()
		return err
	}
	r.lock = lock
	return nil
}

// Close releases what the run holds: the metrics files and OUT's lock. Train
// calls it when it returns; call it for a run that is not trained.
func (r *Run) Close() error {
	r.endTracking(false, nil)
	var err error
	if r.metrics != nil {
		err = r.metrics.Close()
	}
	r.stopReward()
	return errors.Join(err, r.lock.Release())
}

// rng is the random source for one purpose of one agent at one step.
func (r *Run) rng(step, agent int, purpose string) *rand.Rand {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d/%s", step, agent, purpose)
	return rand.New(rand.NewPCG(r.seed, h.Sum64()))
}

// Agents returns the run's agents.
func (r *Run) Agents() []*Agent { return r.agents }

// StartStep is the number of steps already done (after a resume).
func (r *Run) StartStep() int { return r.start }

// Train runs the remaining steps. Cancelling ctx stops after the current step,
// saves a checkpoint and returns ErrInterrupted.
//
// A member process (Options.Member) stops where every agent of the run
// stops, whichever was interrupted: cancelling its ctx makes it ask the
// others, with the next step it shares, to stop after that step; every
// agent (this one too) finishes the first step at which a request counts
// (Exchange), saves a checkpoint and returns an error that wraps
// ErrInterrupted and names the agents that asked. One a step ahead of
// another thus stops at the step the other asks at, and no agent waits for
// a step that another never shares. A stop agreed at the last step is the
// run's normal end.
func (r *Run) Train(ctx context.Context) (_ *Summary, err error) {
	defer func() {
		r.endTracking(true, err)
		r.Close()
	}()
	if r.member != nil {
		r.interrupt = ctx.Done()
		ctx = context.WithoutCancel(ctx)
	}
	if err := r.startReward(ctx); err != nil {
		return nil, err
	}
	steps := r.cfg.Steps
	t0 := time.Now()
	if r.complete {
		if err := r.saveFinal(true); err != nil {
			return nil, err
		}
		s := r.summary(r.start, 0)
		s.AlreadyComplete = true
		return s, nil
	}
	// The servers start from the weights the run starts from.
	for _, a := range r.agents {
		if err := r.pushWeights(ctx, a, r.start, nil); err != nil {
			return nil, err
		}
	}
	if r.start == 0 && *r.cfg.Eval.AtStart && len(r.evals) > 0 {
		if err := r.evaluate(ctx, 0); err != nil {
			return nil, err
		}
	}
	for step := r.start; step < steps; step++ {
		if ctx.Err() != nil {
			if err := r.checkpoint(step); err != nil {
				return nil, err
			}
			return r.summary(step, time.Since(t0)), ErrInterrupted
		}
		ts := time.Now()
		r.wide = map[string]float64{}
		r.stoppedBy = nil
		// A step runs to its end even when interrupted, so that a checkpoint
		// never holds some agents updated and others not.
		vals, err := r.step(context.WithoutCancel(ctx), step)
		if err != nil {
			return nil, err
		}
		done := step + 1
		elapsed := time.Since(ts)
		for _, a := range r.agents {
			if err := r.metrics.Write(metrics.Record{Step: done, Agent: a.Name, Values: vals[a.Index]}); err != nil {
				return nil, err
			}
		}
		r.wide["time/step"] = elapsed.Seconds()
		if err := r.metrics.Write(metrics.Record{Step: done, Values: r.wide}); err != nil {
			return nil, err
		}
		r.obs.Step(done, steps, elapsed, r.stepSummary(vals))
		last := done == steps
		if len(r.evals) > 0 && (last || (r.cfg.Eval.Every > 0 && done%r.cfg.Eval.Every == 0)) {
			if err := r.evaluate(context.WithoutCancel(ctx), done); err != nil {
				return nil, err
			}
		}
		stop := len(r.stoppedBy) > 0 && !last
		if last || stop || (r.cfg.Checkpoint.Every > 0 && done%r.cfg.Checkpoint.Every == 0) {
			if err := r.checkpoint(done); err != nil {
				return nil, err
			}
			if err := r.keepFrom(ctx); err != nil {
				return nil, err
			}
		}
		if stop {
			return r.summary(done, time.Since(t0)), fmt.Errorf("%w: stopped after step %d, as %s asked", ErrInterrupted, done, strings.Join(r.stoppedBy, " and "))
		}
	}
	if err := r.saveFinal(false); err != nil {
		return nil, err
	}
	return r.summary(steps, time.Since(t0)), nil
}

// interrupted reports whether a member's Train context was cancelled.
func (r *Run) interrupted() bool {
	select {
	case <-r.interrupt:
		return true
	default:
		return false
	}
}

// stepSummary is the step's numbers of each agent, by name, those a user
// watches: acc, the fraction of its responses judged correct (and, with an
// external reward, reward, their mean reward); len, their mean length in
// tokens, with the fraction cut at max_new_tokens when any was; ω, the
// capability ratio that weighs each other agent's rollouts in its update
// (methods that share rollouts, in config order); clip, the fraction of
// its own tokens (sequences under GSPO) clipped and, after "/", of the
// other agents' sequences clipped at either bound.
func (r *Run) stepSummary(vals []map[string]float64) map[string]string {
	nums := make(map[string]string, len(r.agents))
	for _, a := range r.agents {
		v := vals[a.Index]
		var b strings.Builder
		if r.reward != nil {
			fmt.Fprintf(&b, "reward %.3f ", v["reward/mean"])
		}
		fmt.Fprintf(&b, "acc %.3f len %.1f", v["accuracy/train"], v["length/mean"])
		if cut := v["length/truncated_frac"]; cut > 0 {
			fmt.Fprintf(&b, " (%.0f%% cut)", 100*cut)
		}
		if r.algo.SharesRollouts && len(r.names) > 1 {
			var ws []string
			for _, src := range r.names {
				if w, ok := v["omega/"+src]; ok && src != a.Name {
					ws = append(ws, fmt.Sprintf("%.2f", w))
				}
			}
			if len(ws) > 0 {
				fmt.Fprintf(&b, " ω %s", strings.Join(ws, "/"))
			}
		}
		fmt.Fprintf(&b, " clip %.2f", v["clip/self_frac"])
		if r.algo.SharesRollouts && len(r.names) > 1 {
			fmt.Fprintf(&b, "/%.2f", v["clip/cross_lower_frac"]+v["clip/cross_upper_frac"])
		}
		nums[a.Name] = b.String()
	}
	return nums
}

// saveFinal writes every agent as a standalone checkpoint in OUT/final/<name>,
// ready for `hacrl eval` or as the starting point of another run. With
// onlyMissing (a finished run resumed) it writes only those a run killed
// before the end did not, and those whose files differ from their
// checksums.json (from the last checkpoint, which holds the same weights).
func (r *Run) saveFinal(onlyMissing bool) error {
	for _, a := range r.agents {
		dst := filepath.Join(r.cfg.Out, "final", a.Name)
		if _, err := os.Stat(filepath.Join(dst, "agent.json")); onlyMissing && err == nil {
			err := verifyDir(dst)
			if err == nil {
				continue
			}
			r.obs.Log(fmt.Sprintf("resume: final agent %s is damaged, writing it again from the last checkpoint: %v", dst, err))
		}
		if err := atomicfile.WriteDir(dst, withChecksums(func(tmp string) error { return saveAgent(a, tmp, false) })); err != nil {
			return fmt.Errorf("train: final checkpoint of %s: %w", a.Name, err)
		}
	}
	return nil
}

type logObserver struct{}

func (logObserver) Phase(int, string, string)                       {}
func (logObserver) Step(int, int, time.Duration, map[string]string) {}
func (logObserver) Log(msg string)                                  { fmt.Fprintln(os.Stderr, msg) }

// Plan describes the derived batch arithmetic of the run, per agent: rollouts
// per step, sequences per mini-batch and updates per step.
func (r *Run) Plan() string {
	var b strings.Builder
	c := r.cfg.Batch
	G := c.ResponsesPerPrompt * r.algo.ResponsesMultiplier
	// Sequences of equal length: the original semantics' balance_batch
	// orders the real ones by their lengths, which only sampling tells.
	lengths := make([][]int, len(r.names))
	for i := range lengths {
		lengths[i] = slices.Repeat([]int{1}, c.PromptsPerStep*G)
	}
	fmt.Fprintf(&b, "method %s (%s rollouts), %d agents, %d steps, seed %d\n", r.algo.Method,
		map[bool]string{true: "shared", false: "private"}[r.algo.SharesRollouts], len(r.names), r.cfg.Steps, r.cfg.Seed)
	fmt.Fprintf(&b, "per step: %d prompts × %d responses = %d rollouts per agent\n", c.PromptsPerStep, G, c.PromptsPerStep*G)
	if r.algo.DynamicSampling {
		fmt.Fprintf(&b, "dynamic sampling: the step keeps the prompts whose rewards differ, sampling up to %d rounds of %d prompts to keep %d; a step short of them trains on fewer\n",
			r.algo.MaxSampleRounds, c.PromptsPerStep, c.PromptsPerStep)
	}
	if r.algo.OverlongPenalty > 0 {
		fmt.Fprintf(&b, "overlong penalty: a response loses up to %g reward over its last %d tokens before max_new_tokens\n", r.algo.OverlongPenalty, r.algo.OverlongBuffer)
	}
	if r.algo.RolloutIS != "" && r.algo.RolloutIS != hacpo.ISOff {
		var corrected []string
		for _, a := range r.agents {
			if a.samplerDiffers() {
				corrected = append(corrected, a.Name)
			}
		}
		who := "no agent here samples with other weights than it trains (rollout engine openai or sample_dtype bfloat16): every weight is 1"
		if len(corrected) > 0 {
			who = "for " + strings.Join(corrected, ", ")
		}
		fmt.Fprintf(&b, "rollout correction: %s weights min(π_old/π_sampler, %g), %s\n", r.algo.RolloutIS, r.algo.RolloutISCap, who)
	}
	if r.algo.IsOriginal() {
		fmt.Fprintf(&b, "original semantics: each step's batch is balanced over %d ranks by sequence length; the membership below is for sequences of equal length\n", hacpo.OriginalRanks)
	}
	for _, a := range r.agents {
		p, err := r.algo.PlanStep(a.Index, lengths, c.MiniBatch)
		if err != nil {
			fmt.Fprintf(&b, "  %s: %v\n", a.Name, err)
			continue
		}
		micro := c.MicroBatch
		if micro == 0 {
			micro = c.MiniBatch
		}
		fmt.Fprintf(&b, "  %-14s %s, params %s", a.Name, a.Model.Config().Family, count(a.Model.NumParams()))
		if l, ok := a.Model.LoRA(); ok {
			fmt.Fprintf(&b, ", trainable %s (LoRA r %d on %s)", count(a.Model.NumTrainable()), l.Rank, strings.Join(a.Model.LoRAModules(), ", "))
		}
		fmt.Fprintf(&b, "; trains on %d sequences in %d updates of up to %d (micro-batch %d); lr %g %s\n",
			p.Sequences(), p.Updates(), c.MiniBatch, micro, a.Opt.LR, a.Opt.Schedule)
		for _, mb := range p.MiniBatches {
			fmt.Fprintf(&b, "      m=%d: %d self + %d cross", mb.M, mb.Self, mb.Cross)
			if mb.Cross > 0 && mb.CrossLower > 0 {
				fmt.Fprintf(&b, ", cross lower bound %.4g", mb.CrossLower)
			}
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// count writes a number of parameters as a person reads it: in full below
// 10,000, else to three significant digits with K, M or B (36.9K, 596M).
func count(n int64) string {
	if n < 10000 {
		return strconv.FormatInt(n, 10)
	}
	units := []string{"K", "M", "B", "T"}
	v, u := float64(n)/1000, 0
	for v >= 999.5 && u < len(units)-1 {
		v, u = v/1000, u+1
	}
	digits := 0
	switch {
	case v < 9.995:
		digits = 2
	case v < 99.95:
		digits = 1
	}
	return strconv.FormatFloat(v, 'f', digits, 64) + units[u]
}

// setComputeDType gives an agent's model and its reference the compute
// dtype named (config's agents[].compute_dtype).
func setComputeDType(a *Agent, name string) error {
	dt, err := model.ParseComputeDType(name)
	if err != nil {
		return err
	}
	for _, m := range []*model.Model{a.Model, a.Ref} {
		if m == nil {
			continue
		}
		if err := m.SetComputeDType(dt); err != nil {
			return err
		}
	}
	return nil
}
