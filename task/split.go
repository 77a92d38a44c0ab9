package task

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
)

// testShare is the fraction of a generated task's problem space (in tenths)
// that belongs to the test split.
const testShare = 1

// maxDraws bounds the redraws a generator makes to land in a split. With a
// test share of one tenth the expected number is 10; the option ranges New
// accepts keep every problem space large enough for both splits.
const maxDraws = 1 << 16

// splitOf returns the split a problem with the given canonical form belongs
// to. It depends only on the task name and the canonical form, never on the
// seed, so train and test stay disjoint across seeds.
func splitOf(name, canonical string) Split {
	if hash64(name, canonical)%10 < testShare {
		return Test
	}
	return Train
}

// hash64 is FNV-1a over the parts (separated by NUL) followed by the
// splitmix64 finalizer, which spreads short inputs over all bits.
func hash64(parts ...string) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return mix64(h.Sum64())
}

func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// problemRand returns the random source for problem index of split.
func problemRand(name string, seed uint64, split Split, index int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, mix64(hash64(name, string(split))^uint64(index))))
}

// draw calls gen with r until it yields a problem whose canonical form
// belongs to split, and returns that problem.
func draw[P any](name string, split Split, r *rand.Rand, gen func(*rand.Rand) (P, string)) P {
	if !split.Valid() {
		panic(fmt.Sprintf("task %s: unknown split %q (want %q or %q)", name, split, Train, Test))
	}
	for range maxDraws {
		p, canonical := gen(r)
		if splitOf(name, canonical) == split {
			return p
		}
	}
	panic(fmt.Sprintf("task %s: no %s problem in %d draws; the problem space is too small", name, split, maxDraws))
}
