package train

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/rollout"
	"github.com/hacrl/hacrl/rolloutengine"
	"github.com/hacrl/hacrl/task"
)

// stepResult is what one step measured, per agent.
type stepResult struct {
	values []map[string]float64 // per agent
}

// step runs one training step and returns each agent's metrics.
func (r *Run) step(ctx context.Context, step int) ([]map[string]float64, error) {
	// Indexed by the config's agent order (Agent.Index): a member process
	// fills only its own agent's entries.
	vals := make([]map[string]float64, len(r.names))
	for _, a := range r.agents {
		vals[a.Index] = map[string]float64{}
	}
	b, err := r.sample(ctx, step, vals)
	if err != nil {
		return nil, err
	}
	// Capabilities take this step's rewards before any advantage (spec §7
	// item 14): those of every response sampled, with dynamic sampling those
	// of the prompts it dropped too, since the capability estimates the
	// agent's accuracy and the dropped groups are its all-right and
	// all-wrong ones.
	if err := r.tracker.Update(b.rewards); err != nil {
		return nil, fmt.Errorf("step %d: capability: %w", step+1, err)
	}
	pool, src := b.pool, b.src
	tr := r.newTrace(step+1, pool)
	for _, a := range r.agents {
		k := a.Index
		vals[k]["capability"] = r.tracker.Capability(k)
		if r.algo.SharesRollouts {
			for j, src := range r.names {
				if j != k {
					vals[k]["omega/"+src] = r.tracker.Omega(j, k)
				}
			}
		}
		if err := r.learn(ctx, step, k, a, pool, b.prompts[k], src, vals[k], tr); err != nil {
			return nil, err
		}
		if err := r.pushWeights(ctx, a, step+1, vals[k]); err != nil {
			return nil, err
		}
		r.idle(a)
	}
	if err := r.writeRollouts(step+1, b.problems, pool, src.texts, tr); err != nil {
		return nil, err
	}
	return vals, nil
}

// drawProblems returns the step's prompts: positions step·B … step·B+B−1 of
// the training split (for finite datasets, of a seeded permutation per epoch).
func (r *Run) drawProblems(step int) []task.Problem {
	B := r.cfg.Batch.PromptsPerStep
	out := make([]task.Problem, B)
	for i := range out {
		out[i] = r.data.at(step*B + i)
	}
	return out
}

// renderPrompts applies an agent's template to every problem.
func renderPrompts(a *Agent, problems []task.Problem) [][]int {
	out := make([][]int, len(problems))
	for i, p := range problems {
		out[i] = a.Template.Prompt(a.Tok, p.Question)
	}
	return out
}

// CheckFits reports the problems whose prompts, rendered for agent a, leave
// no room for maxNew response tokens in the model's context: all of them
// counted, the first few named.
func CheckFits(a *Agent, problems []task.Problem, maxNew int) error {
	return fitError(a, problems, misfits(a, problems, maxNew), maxNew)
}

// misfit is a problem (by index) whose prompt of tokens is too long.
type misfit struct{ index, tokens int }

// misfits lists the problems whose prompts for a leave no room for maxNew
// tokens, in order.
func misfits(a *Agent, problems []task.Problem, maxNew int) []misfit {
	var bad []misfit
	maxSeq := a.Model.Config().MaxSeq
	for i, p := range problems {
		if n := len(a.Template.Prompt(a.Tok, p.Question)); n+maxNew > maxSeq {
			bad = append(bad, misfit{i, n})
		}
	}
	return bad
}

// shownMisfits is how many misfits an error names.
const shownMisfits = 5

// fitError describes the misfits among problems for agent a (nil if none).
func fitError(a *Agent, problems []task.Problem, bad []misfit, maxNew int) error {
	if len(bad) == 0 {
		return nil
	}
	maxSeq := a.Model.Config().MaxSeq
	if len(bad) == 1 {
		p := problems[bad[0].index]
		return fmt.Errorf("agent %s: problem %s: prompt of %d tokens + %d new tokens exceeds the model's context of %d",
			a.Name, p.ID, bad[0].tokens, maxNew, maxSeq)
	}
	var names []string
	for _, m := range bad[:min(len(bad), shownMisfits)] {
		names = append(names, fmt.Sprintf("%s (%d tokens)", problems[m.index].ID, m.tokens))
	}
	more := ""
	if len(bad) > shownMisfits {
		more = fmt.Sprintf(" and %d more", len(bad)-shownMisfits)
	}
	return fmt.Errorf("agent %s: %d of %d problems have a prompt that + %d new tokens exceeds the model's context of %d: %s%s",
		a.Name, len(bad), len(problems), maxNew, maxSeq, strings.Join(names, ", "), more)
}

// stepBatch is what a step trains on once sampling is done: its problems,
// each agent's prompts rendered for them (by Agent.Index), the pool of
// responses numbered by the same prompts, the sources' prompts, and the
// reward of every response the step sampled, by source, for the capability
// tracker (those of prompts dynamic sampling dropped included).
type stepBatch struct {
	problems []task.Problem
	prompts  [][][]int
	pool     *rollout.Pool
	src      *sources
	rewards  [][]float64
}

// sample makes every agent answer every prompt G times and scores the answers
// with the verifier and with the source's own model (old log-probs, spec §2.7
// step 3). Under dynamic sampling it runs more rounds and keeps the prompts
// that teach something (dynamic.go). It fills per-agent sampling metrics over
// every response the step sampled. A member process does this for its own
// agent and shares the result (exchange.go); the pool it returns holds every
// agent's rollouts either way, with each source's prompt texts when the
// step's rollouts are logged.
func (r *Run) sample(ctx context.Context, step int, vals []map[string]float64) (*stepBatch, error) {
	stats := make([]samplingStats, len(r.names))
	var b *stepBatch
	if r.algo.DynamicSampling {
		var err error
		if b, err = r.sampleDynamic(ctx, step, stats); err != nil {
			return nil, err
		}
	} else {
		rd, err := r.sampleRound(ctx, step, 0, r.drawProblems(step), stats)
		if err != nil {
			return nil, err
		}
		b = &stepBatch{problems: rd.problems, prompts: rd.prompts, pool: rd.pool, src: r.newSources(step, rd.problems, rd.prompts)}
		if r.member != nil {
			if b.pool, err = r.share(ctx, step, b.pool, b.src); err != nil {
				return nil, err
			}
		}
		b.rewards = sourceRewards(len(r.names), b.pool.Rollouts)
	}
	for _, a := range r.agents {
		stats[a.Index].write(a, r.algo.OverlongPenalty > 0, vals[a.Index])
	}
	return b, nil
}

// sourceRewards lists the rewards of rollouts by source, in order.
func sourceRewards(agents int, rollouts []rollout.Rollout) [][]float64 {
	rewards := make([][]float64, agents)
	for _, ro := range rollouts {
		rewards[ro.Source] = append(rewards[ro.Source], ro.Reward)
	}
	return rewards
}

// newSources describes the step's prompts as this process's agents
// rendered them (prompts, by Agent.Index).
func (r *Run) newSources(step int, problems []task.Problem, prompts [][][]int) *sources {
	src := &sources{texts: r.promptTexts(step+1, problems), lens: make([][]int, len(r.names))}
	for _, a := range r.agents {
		src.lens[a.Index] = make([]int, len(problems))
		for i, p := range prompts[a.Index] {
			src.lens[a.Index][i] = len(p)
		}
	}
	return src
}

// sources describes the prompts of a step's sources, per agent (by
// Agent.Index) and prompt: how many tokens each took, and their text when
// the step's rollouts are logged (texts nil otherwise). A member process
// learns the other agents' from the exchange.
type sources struct {
	texts [][]string
	lens  [][]int
}

// promptTexts renders the step's prompts as text for each of this process's
// agents (by Agent.Index), when the step's rollouts are logged; else nil.
func (r *Run) promptTexts(step int, problems []task.Problem) [][]string {
	if !r.logsRollouts(step) {
		return nil
	}
	texts := make([][]string, len(r.names))
	for _, a := range r.agents {
		texts[a.Index] = make([]string, len(problems))
		for i, p := range problems {
			texts[a.Index][i] = a.Template.RenderFor(a.Tok, p.Question)
		}
	}
	return texts
}

// samplingStats sums one agent's sampling measurements over a step's rounds,
// for its metrics (write).
type samplingStats struct {
	samples                []rolloutengine.Sample
	tokens, truncated      int
	sampleTime, scoreTime  float64
	entropy                float64
	entropyTokens, correct int
	reward, penalty        float64 // sums of the rewards (shaped) and the overlong penalties
	served, scored         [][]float32
}

// write sets agent a's sampling metrics: means over every response of the
// step, times summed over its rounds; reward/overlong_penalty when the
// penalty is on.
func (st *samplingStats) write(a *Agent, overlong bool, v map[string]float64) {
	n := float64(len(st.samples))
	v["length/mean"] = float64(st.tokens) / n
	v["length/truncated_frac"] = float64(st.truncated) / n
	v["time/sample"] = st.sampleTime
	v["tokens_per_s/sample"] = float64(st.tokens) / math.Max(st.sampleTime, 1e-9)
	// The log-probs the samples were drawn with, set against the old
	// log-probs: a server's, or bfloat16 weights'.
	if weightVersionMetrics(a, st.samples, v) || a.Model.SampleDType() == model.WeightsBFloat16 {
		v["rollout/logprob_abs_diff"] = logProbDiff(st.served, st.scored)
	}
	v["entropy"] = st.entropy / math.Max(float64(st.entropyTokens), 1)
	v["time/score"] = st.scoreTime
	v["reward/mean"] = st.reward / n
	v["accuracy/train"] = float64(st.correct) / n
	if overlong {
		v["reward/overlong_penalty"] = st.penalty / n
	}
}

// round is one sampling round of a step: its problems, each of this
// process's agents' prompts (by Agent.Index), the pool of their responses,
// and each response's reward from the task before any shaping (by pool
// index), which dynamic sampling filters on.
type round struct {
	problems []task.Problem
	prompts  [][][]int
	pool     *rollout.Pool
	task     []float64
}

// sampleRound renders problems for this process's agents and runs round rnd
// of step on them (sampleOwn).
func (r *Run) sampleRound(ctx context.Context, step, rnd int, problems []task.Problem, stats []samplingStats) (*round, error) {
	rd := &round{problems: problems, prompts: make([][][]int, len(r.names))}
	for _, a := range r.agents {
		if err := CheckFits(a, problems, a.Sampling.MaxNewTokens); err != nil {
			return nil, fmt.Errorf("step %d: %w", step+1, err)
		}
		rd.prompts[a.Index] = renderPrompts(a, problems)
	}
	var err error
	rd.pool, rd.task, err = r.sampleOwn(ctx, step, rnd, problems, rd.prompts, stats)
	return rd, err
}

// sampleOwn is round rnd of sample for this process's agents: sampling,
// rewards and old log-probs. Round 0 draws from the stream every step has
// drawn from; a later round from one of its own, so that a run with one
// round samples as it always has.
func (r *Run) sampleOwn(ctx context.Context, step, rnd int, problems []task.Problem, prompts [][][]int, stats []samplingStats) (*rollout.Pool, []float64, error) {
	G := r.cfg.Batch.ResponsesPerPrompt * r.algo.ResponsesMultiplier
	pool := &rollout.Pool{Agents: len(r.names), Prompts: len(problems)}
	sampled := make([][][]float32, len(r.names)) // per agent whose sampler is not the trainer, its log-probs of each response
	purpose := "sample"
	if rnd > 0 {
		purpose = fmt.Sprintf("sample/round %d", rnd)
	}
	for _, a := range r.agents {
		j := a.Index
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		r.obs.Phase(step+1, a.Name, "sample")
		t0 := time.Now()
		batch := make([][]int, 0, len(problems)*G)
		for i := range problems {
			for range G {
				batch = append(batch, prompts[j][i])
			}
		}
		samples, err := a.sampler().Sample(ctx, batch, a.Sampling, r.rng(step, j, purpose))
		if err != nil {
			return nil, nil, fmt.Errorf("step %d: agent %s: sampling: %w", step+1, a.Name, err)
		}
		st := &stats[j]
		st.sampleTime += time.Since(t0).Seconds()
		r.idle(a)
		for n, s := range samples {
			i := n / G
			text := responseText(a, s.Sample)
			pool.Rollouts = append(pool.Rollouts, rollout.Rollout{
				Prompt: i, Source: j, Text: text, Tokens: s.Tokens, Stopped: s.Stopped, WeightVersion: s.WeightVersion,
			})
			st.tokens += len(s.Tokens)
			if !s.Stopped {
				st.truncated++
			}
			st.served = append(st.served, s.LogProbs)
		}
		st.samples = append(st.samples, samples...)
		if a.samplerDiffers() {
			sampled[j] = make([][]float32, len(samples))
			for n, s := range samples {
				sampled[j][n] = s.LogProbs
			}
		}
	}
	taskRewards, err := r.scoreRewards(ctx, step, problems, pool, stats)
	if err != nil {
		return nil, nil, err
	}
	// Old log-probs: every source scores its own responses before any update.
	for _, a := range r.agents {
		j := a.Index
		r.obs.Phase(step+1, a.Name, "score")
		t0 := time.Now()
		own := pool.BySource(j)
		seqs := make([]model.Sequence, len(own))
		for i, ro := range own {
			seqs[i] = model.Sequence{Prompt: prompts[j][ro.Prompt], Response: ro.Tokens}
		}
		sc, err := a.Model.Score(ctx, seqs, true)
		if err != nil {
			return nil, nil, fmt.Errorf("step %d: agent %s: scoring its responses: %w", step+1, a.Name, err)
		}
		st := &stats[j]
		for i, ro := range own {
			ro.OldLogProbs = sc.LogProbs[i]
			if sampled[j] != nil {
				if ro.ISWeights, err = r.algo.RolloutWeights(ro.OldLogProbs, sampled[j][i]); err != nil {
					return nil, nil, fmt.Errorf("step %d: agent %s: response %d: %w", step+1, a.Name, i, err)
				}
			}
			for _, e := range sc.Entropy[i] {
				st.entropy += float64(e)
				st.entropyTokens++
			}
		}
		st.scored = append(st.scored, sc.LogProbs...)
		st.scoreTime += time.Since(t0).Seconds()
		r.idle(a)
	}
	return pool, taskRewards, nil
}

// scoreRewards scores every agent's responses of the pool in one batch (the
// task's checker or the external reward) and sets each response's reward:
// the task's, plus DAPO's overlong penalty when the method has one (from the
// length of the response against its agent's max_new_tokens). It returns the
// task's rewards by pool index, adds to each agent's sums for reward/mean,
// accuracy/train and reward/overlong_penalty, and to the step's time/reward
// (and reward/calls).
func (r *Run) scoreRewards(ctx context.Context, step int, problems []task.Problem, pool *rollout.Pool, stats []samplingStats) ([]float64, error) {
	for _, a := range r.agents {
		r.obs.Phase(step+1, a.Name, "reward")
	}
	t0 := time.Now()
	calls := 0
	if r.reward != nil {
		calls = r.reward.Calls()
	}
	rs := make([]response, len(pool.Rollouts))
	for i, ro := range pool.Rollouts {
		rs[i] = response{problem: problems[ro.Prompt], agent: r.agent(ro.Source), text: ro.Text, tokens: len(ro.Tokens), stopped: ro.Stopped}
	}
	res, err := r.trainJudge(step+1)(ctx, rs)
	if err != nil {
		return nil, fmt.Errorf("step %d: %w", step+1, err)
	}
	taskRewards := make([]float64, len(pool.Rollouts))
	for i := range pool.Rollouts {
		ro := &pool.Rollouts[i]
		st := &stats[ro.Source]
		taskRewards[i] = res[i].Reward
		ro.Reward = res[i].Reward
		if r.algo.OverlongPenalty > 0 {
			a := r.agent(ro.Source)
			p, err := r.algo.OverlongReward(len(ro.Tokens), a.Sampling.MaxNewTokens)
			if err != nil {
				return nil, fmt.Errorf("step %d: agent %s: %w", step+1, a.Name, err)
			}
			ro.Reward += p
			st.penalty -= p
		}
		st.reward += ro.Reward
		if res[i].Correct {
			st.correct++
		}
	}
	r.wide["time/reward"] += time.Since(t0).Seconds()
	if r.reward != nil {
		r.wide["reward/calls"] += float64(r.reward.Calls() - calls)
	}
	return taskRewards, nil
}

// agent returns this process's agent with config index j.
func (r *Run) agent(j int) *Agent {
	for _, a := range r.agents {
		if a.Index == j {
			return a
		}
	}
	panic(fmt.Sprintf("train: agent %d is not in this process", j))
}

// guard decides what a non-finite loss or gradient does: skip the mini-batch
// (counted in the metrics) or stop the run with an error naming where.
func (r *Run) guard(step int, a *Agent, m int, what string, skipped *int) error {
	msg := fmt.Errorf("step %d: agent %s: mini-batch %d: non-finite %s", step, a.Name, m, what)
	if r.cfg.OnNonFinite == "stop" {
		return fmt.Errorf("%w (on_non_finite: stop)", msg)
	}
	r.obs.Log(fmt.Sprintf("%v; mini-batch skipped (on_non_finite: skip)", msg))
	*skipped++
	return nil
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

var errStop = errors.New("stopped")
