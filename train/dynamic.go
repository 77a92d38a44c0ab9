package train

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/hacpo"
	"github.com/hacrl/hacrl/rollout"
	"github.com/hacrl/hacrl/task"
)

// Dynamic sampling (DAPO; hacpo/doc.go decision 28). A step samples its
// prompts_per_step problems as every step does (round 0), then drops the
// prompts whose groups carry no signal (hacpo.Settings.KeepsPrompt, on the
// task's rewards before any shaping) and samples prompts_per_step fresh
// problems in another round, until prompts_per_step prompts are kept or
// max_sample_rounds rounds have run; the kept prompts are the first ones,
// in the order of their rounds and, within a round, of their prompts, and
// the step trains on them alone (fewer when the rounds ran out: none at
// all is a step without updates).
//
// Round r > 0 of step s draws its problems from a stream of its own,
// seeded by (seed, s, r) (extraProblems), never from the positions of the
// steps to come: a step draws the same problems whatever earlier steps
// dropped, a run without dynamic sampling draws what it always has, and a
// resumed run draws what an uninterrupted one would. Sampling in round r
// uses its own random stream (purpose "sample/round r"), round 0 the one
// every step uses.
//
// The capability tracker sees every response the step sampled, dropped
// groups included: it estimates each agent's accuracy, and the dropped
// groups are exactly the all-right and all-wrong ones. The sampling
// metrics (length, time, entropy, reward, accuracy) cover every round,
// and the step's run-wide record says dynamic/rounds, dynamic/sampled_prompts
// and dynamic/kept_prompts.

// checkDynamic refuses, before any work, dynamic sampling where a step
// cannot run it: in a member process (the filter needs every agent's
// rewards of a round before the next round, which the exchange carries
// once a step), and under the original semantics (whose balanced
// mini-batches need a fixed batch, which a step short of prompts lacks).
func checkDynamic(s hacpo.Settings, cfg *config.Config, member *Member) error {
	if !s.DynamicSampling {
		return nil
	}
	switch {
	case member != nil:
		return fmt.Errorf("%s: dynamic sampling needs every agent's rewards after each sampling round and runs with all agents in one process; it cannot run with agents as processes (hacrl agent, --processes): set it to false or train in one process",
			cfg.Where("method.dynamic_sampling"))
	case s.IsOriginal():
		return fmt.Errorf("%s: dynamic sampling trains on a varying number of prompts, which the original semantics cannot balance over its %d ranks (method.semantics: original): set it to false or use the v1 semantics",
			cfg.Where("method.dynamic_sampling"), hacpo.OriginalRanks)
	}
	return nil
}

// CheckMembers reports what in cfg cannot run with its agents as processes
// (hacrl train --processes, hacrl agent), so that a command refuses it
// before it starts any.
func CheckMembers(cfg *config.Config) error {
	s, err := methodSettings(cfg)
	if err != nil {
		return err
	}
	return checkDynamic(s, cfg, &Member{})
}

// sampleDynamic is sample under dynamic sampling (this process holds every
// agent: checkDynamic).
func (r *Run) sampleDynamic(ctx context.Context, step int, stats []samplingStats) (*stepBatch, error) {
	B := r.cfg.Batch.PromptsPerStep
	type pick struct {
		rd     *round
		prompt int
	}
	var kept []pick
	rewards := make([][]float64, len(r.names))
	rounds := 0
	for rounds < r.algo.MaxSampleRounds && len(kept) < B {
		problems := r.drawProblems(step)
		if rounds > 0 {
			problems = r.extraProblems(step, rounds)
		}
		rd, err := r.sampleRound(ctx, step, rounds, problems, stats)
		if err != nil {
			return nil, err
		}
		rounds++
		for _, ro := range rd.pool.Rollouts {
			rewards[ro.Source] = append(rewards[ro.Source], ro.Reward)
		}
		for p, g := range rd.pool.Groups() {
			if len(kept) == B {
				break
			}
			group := make([]hacpo.Response, len(g))
			for n, i := range g {
				group[n] = hacpo.Response{Source: rd.pool.Rollouts[i].Source, Reward: rd.task[i]}
			}
			if r.algo.KeepsPrompt(group) {
				kept = append(kept, pick{rd, p})
			}
		}
	}

	// The kept prompts, renumbered 0..len(kept)−1, and their rollouts in
	// the pool's order: by source, then prompt, then sample.
	b := &stepBatch{
		problems: make([]task.Problem, len(kept)),
		prompts:  make([][][]int, len(r.names)),
		pool:     &rollout.Pool{Agents: len(r.names), Prompts: len(kept)},
		rewards:  rewards,
	}
	for i, k := range kept {
		b.problems[i] = k.rd.problems[k.prompt]
	}
	for _, a := range r.agents {
		b.prompts[a.Index] = make([][]int, len(kept))
		for i, k := range kept {
			b.prompts[a.Index][i] = k.rd.prompts[a.Index][k.prompt]
		}
	}
	groups := make(map[*round][][]int)
	for j := range r.names {
		for i, k := range kept {
			g, ok := groups[k.rd]
			if !ok {
				g = k.rd.pool.Groups()
				groups[k.rd] = g
			}
			for _, n := range g[k.prompt] {
				if ro := k.rd.pool.Rollouts[n]; ro.Source == j {
					ro.Prompt = i
					b.pool.Rollouts = append(b.pool.Rollouts, ro)
				}
			}
		}
	}
	b.src = r.newSources(step, b.problems, b.prompts)
	r.wide["dynamic/rounds"] = float64(rounds)
	r.wide["dynamic/sampled_prompts"] = float64(rounds * B)
	r.wide["dynamic/kept_prompts"] = float64(len(kept))
	return b, nil
}

// extraProblems returns the problems of sampling round rnd > 0 of step:
// prompts_per_step of them drawn by (seed, step, rnd) apart from the
// positions the steps draw from. A finite training split gives distinct
// problems (of those in use, see problems.restrict) as long as it has
// enough, then starts a fresh draw; a generated task gives the problems at
// random positions from extraBase on, which no run reaches.
func (r *Run) extraProblems(step, rnd int) []task.Problem {
	rng := r.rng(step, rnd, "dynamic sampling")
	out := make([]task.Problem, r.cfg.Batch.PromptsPerStep)
	d := r.data
	if !d.finite {
		for i := range out {
			out[i] = d.task.Problem(task.Train, extraBase+rng.IntN(extraBase))
		}
		return out
	}
	d.mu.Lock()
	n, keep := d.n, d.keep
	d.mu.Unlock()
	var draw *partialShuffle
	for i := range out {
		if i%n == 0 {
			draw = &partialShuffle{n: n, swapped: map[int]int{}}
		}
		idx := draw.next(rng)
		if keep != nil {
			idx = keep[idx]
		}
		out[i] = d.task.Problem(task.Train, idx)
	}
	return out
}

// extraBase is where a generated task's positions for the later sampling
// rounds start: 2⁴⁰, beyond any run's steps × prompts_per_step.
const extraBase = 1 << 40

// partialShuffle draws distinct integers of [0, n) uniformly, one at a
// time: a Fisher–Yates shuffle that records only the positions it swapped.
type partialShuffle struct {
	n, drawn int
	swapped  map[int]int
}

func (p *partialShuffle) next(rng *rand.Rand) int {
	at := func(i int) int {
		if v, ok := p.swapped[i]; ok {
			return v
		}
		return i
	}
	i := p.drawn
	j := i + rng.IntN(p.n-i)
	vi, vj := at(i), at(j)
	p.swapped[j] = vi
	p.drawn++
	return vj
}

// laterRounds lists the problems of every sampling round after the first
// that the run's remaining steps may run under dynamic sampling (none
// without it), for checkTrainFits.
func (r *Run) laterRounds() []task.Problem {
	if !r.algo.DynamicSampling {
		return nil
	}
	var probs []task.Problem
	for step := r.start; step < r.cfg.Steps; step++ {
		for rnd := 1; rnd < r.algo.MaxSampleRounds; rnd++ {
			probs = append(probs, r.extraProblems(step, rnd)...)
		}
	}
	return probs
}
