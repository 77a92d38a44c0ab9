package train

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"

	"github.com/hacrl/hacrl/task"
)

// problems serves the training split in a fixed, seeded order. A generated
// task is endless: position p is its p-th training problem. A finite dataset
// is walked in a fresh seeded permutation every epoch, so the order depends
// only on (seed, position) and a resumed run draws exactly what an
// uninterrupted one would (no replayed or skipped data).
type problems struct {
	task   task.Task
	n      int
	finite bool
	seed   uint64
	source string // for errors: "dataset PATH" or "task NAME"
	keep   []int  // when set, the dataset's indices in use (see restrict)

	mu    sync.Mutex
	epoch int
	perm  []int
}

// newProblems serves t's training split; a finite split without problems is
// an error (named by source, e.g. "dataset train.jsonl").
func newProblems(t task.Task, seed uint64, source string) (*problems, error) {
	n, finite := task.Len(t, task.Train)
	if finite && n == 0 {
		return nil, fmt.Errorf("%s: no training problems", source)
	}
	return &problems{task: t, n: n, finite: finite, seed: seed, source: source, epoch: -1}, nil
}

// restrict makes a finite split serve only the problems at the given
// indices (ascending, non-empty), as one of that many.
func (p *problems) restrict(keep []int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keep, p.n, p.epoch, p.perm = keep, len(keep), -1, nil
}

func (p *problems) at(pos int) task.Problem {
	if !p.finite {
		return p.task.Problem(task.Train, pos)
	}
	epoch, i := pos/p.n, pos%p.n
	p.mu.Lock()
	if epoch != p.epoch {
		r := rand.New(rand.NewPCG(p.seed, 0x9e3779b97f4a7c15^uint64(epoch)))
		p.perm = r.Perm(p.n)
		p.epoch = epoch
	}
	idx := p.perm[i]
	if p.keep != nil {
		idx = p.keep[idx]
	}
	p.mu.Unlock()
	return p.task.Problem(task.Train, idx)
}

// checkTrainFits finds, before the first step, every training problem whose
// prompt leaves some agent no room for its max_new_tokens. A dataset is
// checked whole, since every epoch visits all of it. A generated task is
// endless, so it is checked on exactly the problems this run draws: the
// positions of its remaining steps, steps × prompts_per_step in all, and
// under dynamic sampling the problems of every later round those steps may
// run (laterRounds); a longer run checks more. Misfits are an error that
// counts them per agent and names the first few, unless a dataset says
// too_long: drop, which leaves the problems too long for any agent out of
// every agent's training set and logs how many. A member process learns the
// other agents' misfits through the setup exchange.
func (r *Run) checkTrainFits(ctx context.Context) error {
	var probs []task.Problem
	source := r.data.source
	if r.data.finite {
		probs = make([]task.Problem, r.data.n)
		for i := range probs {
			probs[i] = r.data.task.Problem(task.Train, i)
		}
	} else {
		B := r.cfg.Batch.PromptsPerStep
		for pos := r.start * B; pos < r.cfg.Steps*B; pos++ {
			probs = append(probs, r.data.at(pos))
		}
		probs = append(probs, r.laterRounds()...)
	}
	var errs []string
	tooLong := make([]bool, len(probs))
	dropped := 0
	for _, a := range r.agents {
		bad := misfits(a, probs, a.MaxResponse())
		if err := fitError(a, probs, bad, a.MaxResponse()); err != nil {
			errs = append(errs, err.Error())
		}
		for _, m := range bad {
			if !tooLong[m.index] {
				tooLong[m.index] = true
				dropped++
			}
		}
	}
	if r.member != nil && r.data.finite && r.cfg.Dataset.TooLong == "drop" {
		// Every process must leave out the problems too long for any agent,
		// not only for its own.
		var mine []int
		for i, bad := range tooLong {
			if bad {
				mine = append(mine, i)
			}
		}
		union, all, err := r.shareTooLong(ctx, mine, errs)
		if err != nil {
			return err
		}
		errs, dropped = all, len(union)
		for _, i := range union {
			if i < 0 || i >= len(tooLong) {
				return fmt.Errorf("setup: another agent names training problem %d of %d", i, len(tooLong))
			}
			tooLong[i] = true
		}
	}
	switch {
	case dropped == 0:
		return nil
	case !r.data.finite:
		return fmt.Errorf("%s: training problems this run would draw do not fit (raise max_seq or lower max_new_tokens): %s",
			source, strings.Join(errs, "; "))
	case r.cfg.Dataset.TooLong != "drop":
		return fmt.Errorf("%s: training problems do not fit (dataset.too_long: drop leaves them out): %s", source, strings.Join(errs, "; "))
	case dropped == len(probs):
		return fmt.Errorf("%s: all %d training problems are too long for some agent (dataset.too_long: drop would leave none): %s",
			source, len(probs), strings.Join(errs, "; "))
	}
	keep := make([]int, 0, len(probs)-dropped)
	for i, bad := range tooLong {
		if !bad {
			keep = append(keep, i)
		}
	}
	r.data.restrict(keep)
	r.obs.Log(fmt.Sprintf("%s: dropped %d of %d training problems too long for some agent's context (dataset.too_long: drop); %s",
		source, dropped, len(probs), strings.Join(errs, "; ")))
	return nil
}
