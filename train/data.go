package train

import (
	"math/rand/v2"
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

	mu    sync.Mutex
	epoch int
	perm  []int
}

func newProblems(t task.Task, seed uint64) *problems {
	n, finite := task.Len(t, task.Train)
	return &problems{task: t, n: n, finite: finite, seed: seed, epoch: -1}
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
	p.mu.Unlock()
	return p.task.Problem(task.Train, idx)
}
