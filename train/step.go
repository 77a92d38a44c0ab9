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
	"github.com/hacrl/hacrl/task"
)

// stepResult is what one step measured, per agent.
type stepResult struct {
	values []map[string]float64 // per agent
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

// sample makes every agent answer every prompt G times and scores the answers
// with the verifier and with the source's own model (old log-probs, spec §2.7
// step 3). It fills per-agent sampling metrics. A member process does this
// for its own agent and shares the result (exchange.go); the pool it returns
// holds every agent's rollouts either way, with each source's prompt texts
// when the step's rollouts are logged.
func (r *Run) sample(ctx context.Context, step int, problems []task.Problem, prompts [][][]int, vals []map[string]float64) (*rollout.Pool, *sources, error) {
	pool, err := r.sampleOwn(ctx, step, problems, prompts, vals)
	if err != nil {
		return nil, nil, err
	}
	src := &sources{texts: r.promptTexts(step+1, problems), lens: make([][]int, len(r.names))}
	for _, a := range r.agents {
		src.lens[a.Index] = make([]int, len(problems))
		for i, p := range prompts[a.Index] {
			src.lens[a.Index][i] = len(p)
		}
	}
	if r.member == nil {
		return pool, src, nil
	}
	pool, err = r.share(ctx, step, pool, src)
	return pool, src, err
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

// sampleOwn is sample for this process's agents.
func (r *Run) sampleOwn(ctx context.Context, step int, problems []task.Problem, prompts [][][]int, vals []map[string]float64) (*rollout.Pool, error) {
	G := r.cfg.Batch.ResponsesPerPrompt * r.algo.ResponsesMultiplier
	pool := &rollout.Pool{Agents: len(r.names), Prompts: len(problems)}
	served := make([][][]float32, len(r.names)) // per agent sampling through a server, its log-probs of each response
	for _, a := range r.agents {
		j := a.Index
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r.obs.Phase(step+1, a.Name, "sample")
		t0 := time.Now()
		batch := make([][]int, 0, len(problems)*G)
		for i := range problems {
			for range G {
				batch = append(batch, prompts[j][i])
			}
		}
		samples, err := a.sampler().Sample(ctx, batch, a.Sampling, r.rng(step, j, "sample"))
		if err != nil {
			return nil, fmt.Errorf("step %d: agent %s: sampling: %w", step+1, a.Name, err)
		}
		sampleTime := time.Since(t0).Seconds()
		r.idle(a)
		var tokens, truncated int
		for n, s := range samples {
			i := n / G
			text := responseText(a, s.Sample)
			pool.Rollouts = append(pool.Rollouts, rollout.Rollout{
				Prompt: i, Source: j, Text: text, Tokens: s.Tokens, Stopped: s.Stopped, WeightVersion: s.WeightVersion,
			})
			tokens += len(s.Tokens)
			if !s.Stopped {
				truncated++
			}
		}
		n := float64(len(samples))
		v := vals[j]
		v["length/mean"] = float64(tokens) / n
		v["length/truncated_frac"] = float64(truncated) / n
		v["time/sample"] = sampleTime
		v["tokens_per_s/sample"] = float64(tokens) / math.Max(sampleTime, 1e-9)
		// The log-probs the samples were drawn with, to set against the
		// old log-probs below: a server's, or bfloat16 weights'.
		if weightVersionMetrics(a, samples, v) || a.Model.SampleDType() == model.WeightsBFloat16 {
			for _, s := range samples {
				served[j] = append(served[j], s.LogProbs)
			}
		}
	}
	if err := r.scoreRewards(ctx, step, problems, pool, vals); err != nil {
		return nil, err
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
			return nil, fmt.Errorf("step %d: agent %s: scoring its responses: %w", step+1, a.Name, err)
		}
		var ent float64
		var cnt int
		for i, ro := range own {
			ro.OldLogProbs = sc.LogProbs[i]
			for _, e := range sc.Entropy[i] {
				ent += float64(e)
				cnt++
			}
		}
		vals[j]["entropy"] = ent / math.Max(float64(cnt), 1)
		if served[j] != nil {
			vals[j]["rollout/logprob_abs_diff"] = logProbDiff(served[j], sc.LogProbs)
		}
		vals[j]["time/score"] = time.Since(t0).Seconds()
		r.idle(a)
	}
	return pool, nil
}

// scoreRewards scores every agent's responses of the step in one batch (the
// task's checker or the external reward) and fills each agent's reward/mean
// and accuracy/train, and the step's time/reward (and reward/calls).
func (r *Run) scoreRewards(ctx context.Context, step int, problems []task.Problem, pool *rollout.Pool, vals []map[string]float64) error {
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
		return fmt.Errorf("step %d: %w", step+1, err)
	}
	sum := make([]float64, len(r.names))
	correct := make([]float64, len(r.names))
	count := make([]float64, len(r.names))
	for i := range pool.Rollouts {
		ro := &pool.Rollouts[i]
		ro.Reward = res[i].Reward
		sum[ro.Source] += res[i].Reward
		if res[i].Correct {
			correct[ro.Source]++
		}
		count[ro.Source]++
	}
	for _, a := range r.agents {
		j := a.Index
		vals[j]["reward/mean"] = sum[j] / count[j]
		vals[j]["accuracy/train"] = correct[j] / count[j]
	}
	r.wide["time/reward"] = time.Since(t0).Seconds()
	if r.reward != nil {
		r.wide["reward/calls"] = float64(r.reward.Calls() - calls)
	}
	return nil
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
