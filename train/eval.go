package train

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/evalmetric"
	"github.com/hacrl/hacrl/metrics"
	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/task"
)

// evalSet is one held-out set with its protocol.
type evalSet struct {
	cfg      config.EvalSet
	task     task.Task
	problems []task.Problem
}

// Result is an agent's evaluation on one set: greedy accuracy and, with k
// samples, avg@k, pass@k and maj@k.
type Result struct {
	Problems int
	Values   map[string]float64 // greedy_acc, avg@k, pass@k, maj@k
}

// Evaluate runs one agent alone on a set of problems, as at inference,
// scored by the task's own checker.
func Evaluate(ctx context.Context, a *Agent, t task.Task, probs []task.Problem, set config.EvalSet, rng func(purpose string) *randSource) (*Result, error) {
	return evaluateWith(ctx, a, t, probs, set, rng, taskJudge(t))
}

// evaluateWith is Evaluate with the responses scored by judge (t still
// extracts the answers maj@k votes on).
func evaluateWith(ctx context.Context, a *Agent, t task.Task, probs []task.Problem, set config.EvalSet, rng func(purpose string) *randSource, judge judge) (*Result, error) {
	prompts := renderPrompts(a, probs)
	opt := a.Sampling
	if set.MaxNewTokens > 0 {
		opt.MaxNewTokens = set.MaxNewTokens
	}
	res := &Result{Problems: len(probs), Values: map[string]float64{}}
	greedy := opt
	greedy.Greedy = true
	samples, err := a.Model.Generate(ctx, prompts, greedy, rng("greedy"))
	if err != nil {
		return nil, err
	}
	rs := make([]response, len(samples))
	for i, s := range samples {
		rs[i] = response{problem: probs[i], agent: a, text: responseText(a, s), tokens: len(s.Tokens), stopped: s.Stopped}
	}
	judged, err := judge(ctx, rs)
	if err != nil {
		return nil, err
	}
	var correct float64
	for _, j := range judged {
		if j.Correct {
			correct++
		}
	}
	res.Values["greedy_acc"] = correct / float64(len(probs))
	if k := set.Samples; k > 0 {
		opt.Temperature = set.Temperature
		batch := make([][]int, 0, len(prompts)*k)
		for _, p := range prompts {
			for range k {
				batch = append(batch, p)
			}
		}
		ss, err := a.Model.Generate(ctx, batch, opt, rng("sampled"))
		if err != nil {
			return nil, err
		}
		rs := make([]response, len(ss))
		for n, s := range ss {
			rs[n] = response{problem: probs[n/k], agent: a, text: responseText(a, s), tokens: len(s.Tokens), stopped: s.Stopped}
		}
		judged, err := judge(ctx, rs)
		if err != nil {
			return nil, err
		}
		ex, _ := t.(task.Extractor)
		per := make([][]evalmetric.Sample, len(probs))
		for n, r := range rs {
			s := evalmetric.Sample{Correct: judged[n].Correct}
			if ex != nil {
				s.Answer, s.HasAnswer = ex.Extract(r.text)
			}
			per[n/k] = append(per[n/k], s)
		}
		equal := func(x, y string) bool { return x == y }
		if ex != nil {
			equal = ex.Equal
		}
		avg, err := evalmetric.AvgAtK(evalmetric.Correct(per), k)
		if err != nil {
			return nil, err
		}
		pass, err := evalmetric.MeanPassAtK(evalmetric.Correct(per), k)
		if err != nil {
			return nil, err
		}
		maj, err := evalmetric.MajAtK(per, k, equal)
		if err != nil {
			return nil, err
		}
		res.Values[fmt.Sprintf("avg@%d", k)] = avg
		res.Values[fmt.Sprintf("pass@%d", k)] = pass
		res.Values[fmt.Sprintf("maj@%d", k)] = maj
	}
	return res, nil
}

func responseText(a *Agent, s model.Sample) string {
	body := s.Tokens
	if s.Stopped && len(body) > 0 {
		body = body[:len(body)-1]
	}
	return a.Tok.Decode(body)
}

// evaluate evaluates every agent on every set after `step` steps and records
// eval/<set>/<metric>.
func (r *Run) evaluate(ctx context.Context, step int) error {
	if r.lastEval == nil {
		r.lastEval = map[string]map[string]float64{}
	}
	first := r.firstEval == nil
	if first {
		r.firstEval = map[string]map[string]float64{}
		r.firstEvalStep = step
	}
	r.lastEvalStep = step
	for _, a := range r.agents {
		i := a.Index
		r.obs.Phase(step, a.Name, "eval")
		t0 := time.Now()
		vals := map[string]float64{}
		for _, s := range r.evals {
			ts := time.Now()
			res, err := evaluateWith(ctx, a, s.task, s.problems, s.cfg, func(p string) *randSource { return r.rng(step, i, "eval/"+s.cfg.Name+"/"+p) }, r.evalJudge(s, step))
			if err != nil {
				return fmt.Errorf("eval %s of agent %s at step %d: %w", s.cfg.Name, a.Name, step, err)
			}
			for k, v := range res.Values {
				vals["eval/"+s.cfg.Name+"/"+k] = v
			}
			r.obs.Log(evalLine(step, a.Name, s.cfg.Name, res, time.Since(ts)))
		}
		vals["time/eval"] = time.Since(t0).Seconds()
		if err := r.metrics.Write(metrics.Record{Step: step, Agent: a.Name, Values: vals}); err != nil {
			return err
		}
		if first {
			r.firstEval[a.Name] = vals
		}
		r.lastEval[a.Name] = vals
	}
	return nil
}

// evalLine is the line that reports agent's evaluation on set after step
// steps, which took d: its metrics as metrics.jsonl names them
// (eval/<set>/<metric>), in the final table's order and precision.
func evalLine(step int, agent, set string, res *Result, d time.Duration) string {
	keys := slices.Sorted(maps.Keys(res.Values))
	var b strings.Builder
	fmt.Fprintf(&b, "eval step %d %s %s:", step, agent, set)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s %.3f", k, res.Values[k])
	}
	fmt.Fprintf(&b, " (%d problems, %.1fs)", res.Problems, d.Seconds())
	return b.String()
}

// checkEvalFits reports, before any work, an evaluation prompt that leaves an
// agent no room for its response.
func (r *Run) checkEvalFits() error {
	for i, s := range r.evals {
		for _, a := range r.agents {
			maxNew := a.Sampling.MaxNewTokens
			if s.cfg.MaxNewTokens > 0 {
				maxNew = s.cfg.MaxNewTokens
			}
			if err := CheckFits(a, s.problems, maxNew); err != nil {
				return fmt.Errorf("%s: set %s: %w", r.cfg.Where(fmt.Sprintf("eval.sets[%d]", i)), s.cfg.Name, err)
			}
		}
	}
	return nil
}
