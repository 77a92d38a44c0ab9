package train

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"strings"
	"time"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/hacpo"
	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/rollout"
	"github.com/hacrl/hacrl/task"
)

// idle gives back the memory agent a holds only while it works (its
// passes' buffers, its gradient accumulator, a finished sampling's key-value
// cache) once its turn in a phase has ended, so that agents working one
// after another need the largest one's working memory, not the sum of all.
// Go returns freed memory to the system only after a collection and at the
// scavenger's pace; FreeOSMemory does both now, which at real sizes is
// gigabytes (two 0.5–0.6B agents fit a 24 GB machine only so). Agents
// under idleBytes of weights keep their buffers: their working memory is
// small, and a forced collection per agent and phase tripled the main job's
// time.
func (r *Run) idle(a *Agent) {
	if 4*a.Model.NumParams() < idleBytes {
		return
	}
	a.Model.Trim()
	if a.Trainer != nil {
		a.Trainer.Release()
	}
	if a.Ref != nil {
		a.Ref.Trim()
	}
	debug.FreeOSMemory()
}

// idleBytes is the size of float32 weights from which idle gives an
// agent's working memory back between phases.
const idleBytes = 256 << 20

// learn runs learner k's updates for the step, on its rendered prompts and
// the pool (whose sources' prompts src describes); tr, when not nil,
// records what the learner made of each sample.
func (r *Run) learn(ctx context.Context, step, k int, a *Agent, pool *rollout.Pool, prompts [][]int, src *sources, v map[string]float64, tr *trace) error {
	r.obs.Phase(step+1, a.Name, "update")
	t0 := time.Now()
	view, err := pool.View(rollout.Learner{Index: k, Tokenizer: a.Tok, Prompts: prompts, Stop: a.Stop(), MaxTokens: a.MaxResponse()})
	if err != nil {
		return err
	}
	if r.algo.SharesRollouts {
		var changed, total int
		for j, src := range r.names {
			if j == k {
				continue
			}
			changed += view.Changed[j]
			total += view.Total[j]
			v["retokenize/changed_frac/"+src] = view.ChangedFrac(j)
		}
		v["retokenize/changed_frac"] = float64(changed) / math.Max(float64(total), 1)
	}

	// The learner's settings: seq-mean-token-sum-norm divides by its longest
	// response (Dr. GRPO's constant generation length).
	algo := r.algo
	algo.LossAggTokens = a.MaxResponse()

	// Pool indices by source, in the order PlanMiniBatches numbers them.
	bySource := make([][]int, len(r.names))
	for i, ro := range pool.Rollouts {
		bySource[ro.Source] = append(bySource[ro.Source], i)
	}

	// Reference log-probs of the learner's own responses, for the KL term.
	var ref [][]float32
	if a.Ref != nil {
		seqs := make([]model.Sequence, len(bySource[k]))
		for n, i := range bySource[k] {
			it := view.Items[i]
			seqs[n] = model.Sequence{Prompt: it.Prompt, Response: it.Response}
		}
		sc, err := a.Ref.Score(ctx, seqs, false)
		if err != nil {
			return fmt.Errorf("step %d: learner %s: reference scoring: %w", step+1, a.Name, err)
		}
		ref = sc.LogProbs
	}

	rewards, err := r.learnerRewards(k, pool, bySource[k], ref, v)
	if err != nil {
		return fmt.Errorf("step %d: learner %s: %w", step+1, a.Name, err)
	}
	adv, err := r.advantages(k, pool, rewards)
	if err != nil {
		return fmt.Errorf("step %d: learner %s: advantages: %w", step+1, a.Name, err)
	}
	plan, err := algo.PlanStep(k, seqLengths(pool, bySource, src.lens), r.cfg.Batch.MiniBatch)
	if err != nil {
		return fmt.Errorf("step %d: learner %s: %w", step+1, a.Name, err)
	}

	// The learner's start-of-step log-probs of the cross samples, for the
	// cross bounds that need them.
	var start, anchor []float64
	if algo.NeedsLearnerStart() {
		if start, anchor, err = r.learnerStart(ctx, a, view, v); err != nil {
			return fmt.Errorf("step %d: learner %s: %w", step+1, a.Name, err)
		}
	}
	var diag *crossDiag
	if algo.SharesRollouts {
		diag = newCrossDiag(r.names, k, r.tokSums)
	}

	lr := learningRate(a.Opt, step, r.cfg.Steps)
	var stats hacpo.Stats
	var policy, kl, entropyBonus, gradNorm float64
	var applied, skipped, trainedTokens int
	for m := range plan.MiniBatches {
		refs := plan.Refs(m)
		samples := make([]hacpo.Sample, len(refs))
		seqs := make([]model.Sequence, len(refs))
		items := make([]*rollout.Item, len(refs))
		allSelf := true
		for n, sr := range refs {
			i := bySource[sr.Source][sr.Index]
			it := view.Items[i]
			items[n] = &view.Items[i]
			ro := it.Rollout
			s := hacpo.Sample{Self: it.Self, Source: ro.Source, Advantage: adv[i], OldMeanLogProb: ro.OldMeanLogProb(),
				Masked: algo.MaskTruncated && !ro.Stopped, ISWeights: ro.ISWeights}
			if it.Self {
				s.OldLogProbs = ro.OldLogProbs
				if ref != nil {
					s.RefLogProbs = ref[sr.Index]
				}
			} else {
				s.Omega = r.tracker.Omega(ro.Source, k)
				if start != nil {
					s.LearnerStartMeanLogProb, s.CrossAnchor = start[i], anchor[ro.Source]
				}
				allSelf = false
			}
			samples[n] = s
			tr.use(k, m, i, &it, &s)
			seqs[n] = model.Sequence{Prompt: it.Prompt, Response: it.Response}
			trainedTokens += len(it.Prompt) + len(it.Response)
		}
		// Current log-probs. Before the step's first update the policy is the
		// old policy, so a self-only mini-batch reuses the old log-probs.
		var lp [][]float32
		if applied == 0 && allSelf {
			lp = make([][]float32, len(refs))
			for n := range refs {
				lp[n] = samples[n].OldLogProbs
			}
		} else {
			sc, err := a.Model.Score(ctx, seqs, false)
			if err != nil {
				return fmt.Errorf("step %d: learner %s: mini-batch %d: %w", step+1, a.Name, m, err)
			}
			lp = sc.LogProbs
		}
		loss, grad, err := algo.MiniBatchLoss(m, samples, lp)
		if err != nil {
			return fmt.Errorf("step %d: learner %s: mini-batch %d: %w", step+1, a.Name, m, err)
		}
		tr.loss(loss.Seqs)
		if !finite(loss.Total) {
			if err := r.guard(step+1, a, m, "loss", &skipped); err != nil {
				return err
			}
			tr.skip()
			continue
		}
		if r.lossHook != nil {
			r.lossHook(step+1, a.Name, m, samples, loss, grad)
		}
		if r.gradHook != nil {
			r.gradHook(step+1, a.Name, m, grad)
		}
		micro := r.cfg.Batch.MicroBatch
		if micro <= 0 {
			micro = len(seqs)
		}
		bonus := 0.0 // the entropy bonus's value, Σ e·H
		for lo := 0; lo < len(seqs); lo += micro {
			hi := min(lo+micro, len(seqs))
			if loss.EntropyWeights == nil {
				if _, err := a.Trainer.Accumulate(ctx, seqs[lo:hi], grad[lo:hi]); err != nil {
					return fmt.Errorf("step %d: learner %s: mini-batch %d: %w", step+1, a.Name, m, err)
				}
				continue
			}
			e := loss.EntropyWeights[lo:hi]
			_, H, err := a.Trainer.AccumulateEntropy(ctx, seqs[lo:hi], grad[lo:hi], e)
			if err != nil {
				return fmt.Errorf("step %d: learner %s: mini-batch %d: %w", step+1, a.Name, m, err)
			}
			for b := range H {
				for t, h := range H[b] {
					bonus += float64(e[b][t]) * float64(h)
				}
			}
		}
		gn, err := a.Trainer.Apply(ctx, lr)
		if errors.Is(err, model.ErrNonFinite) {
			if err := r.guard(step+1, a, m, "gradient", &skipped); err != nil {
				return err
			}
			tr.skip()
			continue
		}
		if err != nil {
			return fmt.Errorf("step %d: learner %s: mini-batch %d: %w", step+1, a.Name, m, err)
		}
		applied++
		if diag != nil {
			diag.add(items, samples, loss.Seqs, grad, lp, a.Tok.Decode)
		}
		stats.Add(loss.Stats)
		entropyBonus += bonus
		policy += loss.Policy
		kl += loss.KL
		gradNorm += gn
	}
	n := math.Max(float64(applied), 1)
	el := time.Since(t0).Seconds()
	v["loss/policy"] = policy / n
	v["loss/kl"] = kl / n
	v["grad_norm"] = gradNorm / n
	v["ratio/self_mean"] = stats.SelfRatioMean()
	v["clip/self_frac"] = stats.SelfClipFrac()
	if algo.EntropyCoef > 0 {
		v["loss/entropy_bonus"] = entropyBonus / n
	}
	if stats.ISUnits > 0 {
		v["rollout_is/weight_mean"] = stats.ISWeightMean()
		v["rollout_is/capped_frac"] = stats.ISCappedFrac()
	}
	if algo.MaskTruncated {
		v["masked_frac"] = float64(stats.Masked) / math.Max(float64(stats.Sequences), 1)
	}
	if r.algo.SharesRollouts {
		v["ratio/cross_mean"] = stats.CrossRatioMean()
		v["clip/cross_lower_frac"] = stats.CrossLowerFrac()
		v["clip/cross_upper_frac"] = stats.CrossUpperFrac()
		diag.metrics(v)
	}
	v["updates"] = float64(applied)
	v["skipped_minibatches"] = float64(skipped)
	v["lr"] = lr
	v["time/update"] = el
	v["tokens_per_s"] = float64(trainedTokens) / math.Max(el, 1e-9)
	return nil
}

// learnerRewards returns the rewards learner k's advantages use, by pool
// index: each rollout's reward, less, under kl_in_reward, the KL penalty of
// the learner's own responses (own lists their pool indices, ref their
// reference log-probs in that order); the penalty's mean is the metric
// kl/reward_penalty.
func (r *Run) learnerRewards(k int, pool *rollout.Pool, own []int, ref [][]float32, v map[string]float64) ([]float64, error) {
	rewards := make([]float64, len(pool.Rollouts))
	for i := range pool.Rollouts {
		rewards[i] = pool.Rollouts[i].Reward
	}
	if !r.algo.KLInReward {
		return rewards, nil
	}
	if len(ref) != len(own) {
		return nil, fmt.Errorf("kl_in_reward: %d reference scores for %d responses", len(ref), len(own))
	}
	sum := 0.0
	for n, i := range own {
		p, err := r.algo.KLPenalty(pool.Rollouts[i].OldLogProbs, ref[n])
		if err != nil {
			return nil, fmt.Errorf("response %d: %w", n, err)
		}
		rewards[i] -= p
		sum += p
	}
	v["kl/reward_penalty"] = sum / math.Max(float64(len(own)), 1)
	return rewards, nil
}

// advantages returns learner k's advantage of every rollout of the pool, by
// pool index, from rewards (by pool index): the groups it uses, one per
// prompt, through hacpo's BatchAdvantages (which scales by the batch's std
// when the method says so). Rollouts it does not use get 0.
func (r *Run) advantages(k int, pool *rollout.Pool, rewards []float64) ([]float64, error) {
	var idx [][]int
	var groups [][]hacpo.Response
	for _, g := range pool.Groups() {
		var ix []int
		var group []hacpo.Response
		for _, i := range g {
			ro := &pool.Rollouts[i]
			if ro.Source == k || r.algo.SharesRollouts {
				ix = append(ix, i)
				group = append(group, hacpo.Response{Source: ro.Source, Reward: rewards[i]})
			}
		}
		idx, groups = append(idx, ix), append(groups, group)
	}
	as, err := r.algo.BatchAdvantages(k, groups, r.tracker.Omega)
	if err != nil {
		return nil, err
	}
	adv := make([]float64, len(pool.Rollouts))
	for p, ix := range idx {
		for n, i := range ix {
			adv[i] = as[p][n]
		}
	}
	return adv, nil
}

// methodSettings turns the config's method section into hacpo settings.
func methodSettings(cfg *config.Config) (hacpo.Settings, error) {
	m := cfg.Method
	s, err := hacpo.Preset(m.Name)
	if err != nil {
		return s, fmt.Errorf("%s: unknown method %q; valid: %s", cfg.Where("method.name"), m.Name, strings.Join(hacpo.PresetNames(), ", "))
	}
	setF := func(dst *float64, v *float64) {
		if v != nil {
			*dst = *v
		}
	}
	setF(&s.Alpha, m.Alpha)
	setF(&s.CrossDelta, m.Delta)
	setF(&s.CrossDeltaStep, m.DeltaStep)
	setF(&s.SelfClipLow, m.ClipLow)
	setF(&s.SelfClipHigh, m.ClipHigh)
	setF(&s.KLCoef, m.KLCoef)
	setF(&s.Capability.RatioMin, m.OmegaMin)
	setF(&s.Capability.RatioMax, m.OmegaMax)
	if m.Window != nil {
		s.Capability.Window = *m.Window
	}
	if m.WarmupSteps != nil {
		s.Capability.WarmupSteps = *m.WarmupSteps
	}
	if m.NormalizeStd != nil {
		s.NormalizeStd = *m.NormalizeStd
	}
	if m.ResponsesMultiplier > 0 {
		s.ResponsesMultiplier = m.ResponsesMultiplier
	}
	if m.AdvantageStd != nil {
		s.NormalizeStd = *m.AdvantageStd != "none"
		if s.NormalizeStd {
			s.AdvantageStd = hacpo.StdScope(*m.AdvantageStd)
		}
	}
	if m.LossAgg != nil {
		s.LossAgg = hacpo.LossAgg(*m.LossAgg)
	}
	if m.SelfRule != nil {
		s.SelfRule = hacpo.SelfRule(*m.SelfRule)
	}
	if m.KLEstimator != nil {
		s.KLEstimator = hacpo.KLEstimator(*m.KLEstimator)
	}
	setB := func(dst *bool, v *bool) {
		if v != nil {
			*dst = *v
		}
	}
	setB(&s.KLInReward, m.KLInReward)
	setB(&s.MaskTruncated, m.MaskTruncated)
	setB(&s.DynamicSampling, m.DynamicSampling)
	setF(&s.EntropyCoef, m.EntropyCoef)
	setF(&s.OverlongPenalty, m.OverlongPenalty)
	if m.MaxSampleRounds != nil {
		s.MaxSampleRounds = *m.MaxSampleRounds
	}
	if m.RolloutIS != nil {
		s.RolloutIS = hacpo.ISLevel(*m.RolloutIS)
	}
	setF(&s.RolloutISCap, m.RolloutISCap)
	if err := setOverlongBuffer(&s, cfg); err != nil {
		return s, err
	}
	if m.CrossAdvantage != "" { // else the preset's
		s.CrossPositiveOnly = m.CrossAdvantage == "positive"
		s.CrossNegativeCapable = m.CrossAdvantage == "capable"
	}
	if m.CrossBounds != "fixed" {
		s.CrossBounds = hacpo.CrossBounds(m.CrossBounds)
	}
	switch m.Capability {
	case "accuracy":
		s.Capability.Metric = hacpo.PositiveRate
	case "mean_reward":
		s.Capability.Metric = hacpo.MeanReward
	}
	s.SetRewards(cfg.RewardRange())
	s.Semantics = hacpo.Semantics(m.Semantics)
	if s.IsOriginal() && m.LossAgg == nil {
		s.LossAgg = "" // the original semantics fixes its own (hacpo/doc.go decision 26)
	}
	if err := s.Validate(); err != nil {
		return s, fmt.Errorf("%s: %w", cfg.Where("method"), err)
	}
	if err := checkSemantics(s, cfg); err != nil {
		return s, err
	}
	return s, nil
}

// setOverlongBuffer sets the overlong penalty's ramp: method.overlong_buffer,
// or a fifth of the smallest max_new_tokens of the agents (DAPO's 4096 of
// 20480), which must fit every agent's max_new_tokens.
func setOverlongBuffer(s *hacpo.Settings, cfg *config.Config) error {
	shortest := 0
	for i, a := range cfg.Agents {
		if n := a.Sampling.MaxNewTokens; n > 0 && (shortest == 0 || n < cfg.Agents[shortest-1].Sampling.MaxNewTokens) {
			shortest = i + 1
		}
	}
	if shortest == 0 {
		return nil // no agent yet (a config being resolved for its defaults)
	}
	maxNew := cfg.Agents[shortest-1].Sampling.MaxNewTokens
	if b := cfg.Method.OverlongBuffer; b != nil {
		if *b > maxNew {
			return fmt.Errorf("%s: %d tokens is longer than agent %s's max_new_tokens %d", cfg.Where("method.overlong_buffer"), *b, cfg.Agents[shortest-1].Name, maxNew)
		}
		s.OverlongBuffer = *b
		return nil
	}
	s.OverlongBuffer = max(maxNew/5, 1)
	return nil
}

// BuildTask makes the training task: a generated task or a dataset.
func BuildTask(cfg *config.Config) (task.Task, error) {
	if t := cfg.Task; t != nil {
		tk, err := newTask(t)
		if err != nil {
			return nil, taskError(cfg, "task", err)
		}
		return tk, nil
	}
	tk, err := loadDataset(cfg.Dataset)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Where("dataset.path"), err)
	}
	return tk, nil
}

// taskError names the key of the task section at path that err, from
// newTask, is about: path.option for an option out of its range.
func taskError(cfg *config.Config, path string, err error) error {
	if oe, ok := errors.AsType[*task.OptionError](err); ok {
		return fmt.Errorf("%s: %s", cfg.Where(path+"."+oe.Option), oe.Reason)
	}
	return fmt.Errorf("%s: %w", cfg.Where(path), err)
}

// newTask makes the generated task that t describes.
func newTask(t *config.Task) (task.Task, error) {
	return task.New(t.Name, t.Options())
}
