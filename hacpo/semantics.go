package hacpo

import (
	"container/heap"
	"fmt"
	"slices"
)

// Semantics selects which of the authors' two codebases a run follows where
// they differ in mini-batch membership and loss aggregation (spec §6.4 items
// 6 and 8; doc.go decisions 13, 23–26).
type Semantics string

const (
	// SemanticsV1 follows the verl-V1 port [code-v1]: each learner's own
	// samples first, then each other agent's, cut into mini-batches in that
	// order; every term averaged per sequence, then over the mini-batch
	// ("seq-mean-token-mean"). The empty value means V1 too.
	SemanticsV1 Semantics = "v1"
	// SemanticsOriginal follows the original verl fork [code-orig] whose runs
	// produced the paper's numbers: the step's joint batch is reordered by
	// verl's balance_batch over OriginalRanks data-parallel ranks before it is
	// cut into mini-batches (see PlanBalanced), and the KL, and the GRPO
	// policy loss, are token means over the mini-batch.
	SemanticsOriginal Semantics = "original"
)

// OriginalRanks is the number of data-parallel ranks the original semantics
// balances each step's batch over: the 8 GPUs of the authors' runs
// (n_gpus_per_node = 8 in their launch script; doc.go decision 23).
const OriginalRanks = 8

// IsOriginal reports whether s selects the original semantics.
func (s Settings) IsOriginal() bool { return s.Semantics == SemanticsOriginal }

// validSemantics reports whether v is a known value ("" is V1).
func validSemantics(v Semantics) bool {
	return v == "" || v == SemanticsV1 || v == SemanticsOriginal
}

// PlanStep plans learner's updates for a step under s.Semantics. lengths[a][i]
// is the token count (prompt + response, as agent a sampled it) of agent a's
// i-th response, in the loop's order; V1 uses only the counts. It is
// PlanMiniBatches for V1 and PlanBalanced with OriginalRanks for the original.
func (s Settings) PlanStep(learner int, lengths [][]int, miniBatchSize int) (Plan, error) {
	if s.IsOriginal() {
		return s.PlanBalanced(learner, lengths, miniBatchSize, OriginalRanks)
	}
	counts := make([]int, len(lengths))
	for a, l := range lengths {
		counts[a] = len(l)
	}
	return s.PlanMiniBatches(learner, counts, miniBatchSize)
}

// PlanBalanced plans learner's updates as the original verl fork does
// (spec §6.2 trainer flow, §6.4 item 6; doc.go decisions 23–25):
//
//  1. The step's batch is every agent's responses concatenated, agent 0 first,
//     each in the loop's order (only the learner's own for a method that does
//     not share rollouts).
//  2. balance_batch: the Karmarkar–Karp largest differencing method splits it
//     into `ranks` partitions of equal count with balanced sums of lengths;
//     each partition's indices are sorted, and the partitions concatenated.
//  3. For learner k that order is rotated left by the number of responses of
//     agents 0..k−1 (with two agents of equal counts: the original's swap of
//     the two halves before the second model's update).
//  4. Rank r holds the r-th of `ranks` equal chunks and cuts it into
//     mini-batches of miniBatchSize/ranks sequences; mini-batch m is the m-th
//     piece of every rank, rank 0's first (the last may be smaller).
//
// The batch size must be a multiple of ranks (and at least ranks), and so must
// miniBatchSize. The result is a deterministic function of its arguments.
func (s Settings) PlanBalanced(learner int, lengths [][]int, miniBatchSize, ranks int) (Plan, error) {
	p := Plan{Learner: learner, MiniBatchSize: miniBatchSize, Ranks: ranks}
	if learner < 0 || learner >= len(lengths) {
		return p, fmt.Errorf("hacpo: plan: learner %d out of range for %d agents", learner, len(lengths))
	}
	if ranks < 1 {
		return p, fmt.Errorf("hacpo: plan: ranks must be >= 1, got %d", ranks)
	}
	if miniBatchSize < ranks || miniBatchSize%ranks != 0 {
		return p, fmt.Errorf("hacpo: plan: the original semantics needs a mini-batch size that is a multiple of the %d ranks, got %d", ranks, miniBatchSize)
	}
	// 1. The joint batch, and where the learner's own responses start in it.
	var refs []SeqRef
	var lens []int
	rot := 0
	for a, l := range lengths {
		if a != learner && !s.SharesRollouts {
			continue
		}
		if a == learner {
			rot = len(refs)
		}
		for i, n := range l {
			if n < 1 {
				return p, fmt.Errorf("hacpo: plan: agent %d response %d has length %d, want >= 1 token", a, i, n)
			}
			refs = append(refs, SeqRef{Source: a, Index: i})
			lens = append(lens, n)
		}
	}
	N := len(refs)
	if N == 0 {
		return p, nil
	}
	if N < ranks || N%ranks != 0 {
		return p, fmt.Errorf("hacpo: plan: the original semantics balances the step's %d sequences over %d ranks and needs a multiple of %d", N, ranks, ranks)
	}
	// 2. balance_batch, then 3. the learner's rotation.
	order := make([]int, 0, N)
	for _, part := range BalancedPartitions(lens, ranks) {
		order = append(order, part...)
	}
	order = append(order[rot:], order[:rot]...)
	// 4. Per-rank mini-batches, gathered across ranks.
	per, q := N/ranks, miniBatchSize/ranks
	p.Order = make([]SeqRef, 0, N)
	clamps := s.SharesRollouts && s.CrossRule == CrossHACPO && s.CrossClip
	for m, lo := 0, 0; lo < per; m, lo = m+1, lo+q {
		mb := MiniBatch{M: m, Start: len(p.Order)}
		for r := range ranks {
			for _, g := range order[r*per+lo : r*per+min(lo+q, per)] {
				ref := refs[g]
				p.Order = append(p.Order, ref)
				if ref.Source == learner {
					mb.Self++
				} else {
					mb.Cross++
				}
			}
		}
		mb.End = len(p.Order)
		if mb.Cross > 0 && clamps {
			mb.CrossLower = s.CrossLower(m)
		}
		p.MiniBatches = append(p.MiniBatches, mb)
	}
	return p, nil
}

// BalancedPartitions splits the indices of lengths into k partitions of equal
// count whose sums of lengths are balanced, as verl's get_seqlen_balanced_partitions
// does with equal_size (the Karmarkar–Karp largest differencing method, spec §6.4
// item 6): the indices sorted by (length, index) form groups of k consecutive
// items, each a k-way partial partition of single items sorted by decreasing sum;
// the two partial partitions with the largest spread (max − min sum) are merged,
// pairing the largest set of one with the smallest of the other, until one
// remains. Ties are broken as verl breaks them (doc.go decision 24), so the
// result is verl's. Each partition's indices are sorted; partitions come in
// decreasing order of their sum. len(lengths) must be a positive multiple of k.
func BalancedPartitions(lengths []int, k int) [][]int {
	if k < 1 || len(lengths) < k || len(lengths)%k != 0 {
		panic(fmt.Sprintf("hacpo: BalancedPartitions: %d lengths cannot be split into %d partitions of equal count", len(lengths), k))
	}
	idx := make([]int, len(lengths))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return lengths[a] - lengths[b] }) // ties: by index
	pq := make(kkQueue, 0, len(lengths)/k)
	for off := 0; off < len(idx); off += k {
		st := &kkState{sets: make([]*kkSet, k)}
		for i := range k {
			j := idx[off+i]
			st.sets[i] = &kkSet{sum: lengths[j], items: []kkItem{{j, lengths[j]}}}
		}
		st.sortSets()
		pq = append(pq, st)
	}
	heap.Init(&pq)
	for pq.Len() > 1 {
		a := heap.Pop(&pq).(*kkState)
		b := heap.Pop(&pq).(*kkState)
		for i := range k {
			a.sets[i].merge(b.sets[k-1-i])
		}
		a.sortSets()
		heap.Push(&pq, a)
	}
	out := make([][]int, k)
	for i, set := range pq[0].sets {
		part := make([]int, len(set.items))
		for n, it := range set.items {
			part[n] = it.idx
		}
		slices.Sort(part)
		out[i] = part
	}
	return out
}

type kkItem struct{ idx, val int }

// kkSet is one set of a partial partition: its items in the order they joined.
type kkSet struct {
	sum   int
	items []kkItem
}

func (s *kkSet) merge(o *kkSet) {
	s.items = append(s.items, o.items...)
	s.sum += o.sum
}

// kkSetLess is verl's Set.__lt__: by sum, then item count, then the items
// (index, length) compared lexicographically in joining order.
func kkSetLess(a, b *kkSet) bool {
	if a.sum != b.sum {
		return a.sum < b.sum
	}
	if len(a.items) != len(b.items) {
		return len(a.items) < len(b.items)
	}
	for i := range a.items {
		x, y := a.items[i], b.items[i]
		if x.idx != y.idx {
			return x.idx < y.idx
		}
		if x.val != y.val {
			return x.val < y.val
		}
	}
	return false
}

// kkState is a partial k-way partition, its sets in decreasing order.
type kkState struct{ sets []*kkSet }

// sortSets orders the sets decreasingly. The sets of one state never compare
// equal (their items are distinct indices), so the order is unique.
func (s *kkState) sortSets() {
	slices.SortStableFunc(s.sets, func(a, b *kkSet) int {
		switch {
		case kkSetLess(b, a):
			return -1
		case kkSetLess(a, b):
			return 1
		}
		return 0
	})
}

func (s *kkState) spread() int { return s.sets[0].sum - s.sets[len(s.sets)-1].sum }

// kkQueue pops the state with the largest spread first; equal spreads pop the
// one whose largest set is larger (verl's State.__lt__). Two states never
// compare equal, so the pop order does not depend on the heap's layout.
type kkQueue []*kkState

func (q kkQueue) Len() int { return len(q) }
func (q kkQueue) Less(i, j int) bool {
	a, b := q[i], q[j]
	if sa, sb := a.spread(), b.spread(); sa != sb {
		return sa > sb
	}
	return kkSetLess(b.sets[0], a.sets[0])
}
func (q kkQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *kkQueue) Push(x any)   { *q = append(*q, x.(*kkState)) }
func (q *kkQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}
