package train

import (
	"fmt"

	"github.com/hacrl/hacrl/hacpo"
	"github.com/hacrl/hacrl/rollout"
	"github.com/hacrl/hacrl/task"
)

// trace collects, during a step whose rollouts are logged (config
// rollouts.every), what each learner made of each pooled response: the values
// the update computed anyway, copied as they go by. A nil *trace is a step
// that is not logged; its methods then do nothing.
type trace struct {
	uses [][]rollout.LearnerUse // [pool index][learner]
	seen [][]bool               // [pool index][learner]: the learner trained on it
	// the current mini-batch: its learner and its pool indices in order
	k   int
	cur []int
}

// newTrace returns the trace of step (counted from 1) when its rollouts are
// logged, else nil.
func (r *Run) newTrace(step int, pool *rollout.Pool) *trace {
	if !r.logsRollouts(step) {
		return nil
	}
	tr := &trace{uses: make([][]rollout.LearnerUse, len(pool.Rollouts)), seen: make([][]bool, len(pool.Rollouts))}
	for i := range tr.uses {
		tr.uses[i] = make([]rollout.LearnerUse, pool.Agents)
		tr.seen[i] = make([]bool, pool.Agents)
	}
	return tr
}

// logsRollouts reports whether the rollouts of step (counted from 1) are
// logged (config rollouts.every).
func (r *Run) logsRollouts(step int) bool {
	every := r.cfg.Rollouts.Every
	return every > 0 && step%every == 0
}

// use notes that learner k puts pool item i, as sample s, into mini-batch m.
// Mini-batches come one at a time: the first use of a new one starts it.
func (tr *trace) use(k, m, i int, it *rollout.Item, s *hacpo.Sample) {
	if tr == nil {
		return
	}
	u := &tr.uses[i][k]
	if tr.k != k || len(tr.cur) == 0 || tr.uses[tr.cur[0]][k].Update != m {
		tr.k, tr.cur = k, tr.cur[:0]
	}
	tr.cur = append(tr.cur, i)
	tr.seen[i][k] = true
	*u = rollout.LearnerUse{Self: s.Self, Advantage: s.Advantage, Update: m, RetokenizeChanged: it.Changed, RetokenizeCut: it.Cut}
	if !s.Self {
		u.Omega = s.Omega
	}
}

// loss notes the current mini-batch's per-sequence ratios and clip states.
func (tr *trace) loss(seqs []hacpo.SeqLoss) {
	if tr == nil {
		return
	}
	for n, i := range tr.cur {
		u := &tr.uses[i][tr.k]
		u.Ratio = seqs[n].Ratio
		u.Clip = clipName(seqs[n].Clip)
		u.Kept = seqs[n].Clip == hacpo.Inside
		u.ClippedTokens = seqs[n].ClippedTokens
	}
}

// skip notes that the current mini-batch was skipped.
func (tr *trace) skip() {
	if tr == nil {
		return
	}
	for _, i := range tr.cur {
		tr.uses[i][tr.k].Skipped = true
	}
}

func clipName(c hacpo.Clip) string {
	switch c {
	case hacpo.Below:
		return rollout.ClipBelow
	case hacpo.Above:
		return rollout.ClipAbove
	}
	return rollout.ClipInside
}

// writeRollouts writes the log of step (counted from 1): every pooled
// response, by prompt, then source, then sample, with what each learner made
// of it. It does nothing for a step that is not logged.
func (r *Run) writeRollouts(step int, problems []task.Problem, pool *rollout.Pool, texts [][]string, tr *trace) error {
	if tr == nil {
		return nil
	}
	recs := make([]rollout.Record, 0, len(pool.Rollouts))
	for p, idx := range pool.Groups() { // each group in pool order: by source, then sample
		prob := problems[p]
		sample, last := 0, -1
		for _, i := range idx {
			ro := &pool.Rollouts[i]
			if ro.Source != last {
				sample, last = 0, ro.Source
			}
			rec := rollout.Record{
				Step: step, Prompt: p, ProblemID: prob.ID, Question: prob.Question, Answer: prob.Answer,
				Agent: r.names[ro.Source], Sample: sample, PromptText: texts[ro.Source][p], Response: ro.Text, Reward: ro.Reward,
				Tokens: len(ro.Tokens), Truncated: !ro.Stopped, WeightVersion: ro.WeightVersion, Learners: []rollout.LearnerUse{},
			}
			sample++
			for k, l := range r.names {
				if tr.seen[i][k] {
					u := tr.uses[i][k]
					u.Learner = l
					rec.Learners = append(rec.Learners, u)
				}
			}
			recs = append(recs, rec)
		}
	}
	if err := rollout.WriteLog(rollout.LogPath(r.cfg.Out, step), recs); err != nil {
		return fmt.Errorf("step %d: %w", step, err)
	}
	return nil
}
