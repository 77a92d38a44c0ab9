package model

import (
	"context"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// On the native engine a training step gives the same weights, bit for
// bit, whatever the number of cores and, for a model with an untied LM
// head, however its sequences are split into Accumulate calls: every
// gradient element gets its contributions in token order, straight into
// one buffer. (A tied embedding matrix gets a pass's head rows and then its
// input tokens, so how passes fall changes the order of its additions.)
// So do steps whose gradient has an entropy term (AccumulateEntropy).
func TestNativeStepIndependentOfSplitAndCores(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		entropy bool
	}{{"gpt-gelu", false}, {"llama-gqa", false}, {"qwen3-gqa", false}, {"llama-gqa", true}, {"qwen3-gqa", true}} {
		name := c.name
		seqs, w := weightedSeqs(41, 11)
		var e [][]float32
		if c.entropy {
			_, e = weightedSeqs(41, 11) // the same lengths
			for _, row := range e {
				slices.Reverse(row)
			}
		}
		accumulate := func(tr *Trainer, lo, hi int) error {
			if e == nil {
				_, err := tr.Accumulate(ctx, seqs[lo:hi], w[lo:hi])
				return err
			}
			_, _, err := tr.AccumulateEntropy(ctx, seqs[lo:hi], w[lo:hi], e[lo:hi])
			return err
		}
		step := func(splits []int, procs int) [][]float64 {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			m := newTiny(t, name, 41)
			m.SetEngine(EngineNative)
			tr, err := NewTrainer(m, OptimizerConfig{LearningRate: 1e-2, WeightDecay: 0.1, MaxGradNorm: 1})
			if err != nil {
				t.Fatal(err)
			}
			for range 2 { // two steps: the moments are used too
				lo := 0
				for _, hi := range append(splits, len(seqs)) {
					if err := accumulate(tr, lo, hi); err != nil {
						t.Fatal(err)
					}
					lo = hi
				}
				if _, err := tr.Apply(ctx, 0); err != nil {
					t.Fatal(err)
				}
			}
			return m.allParams()
		}
		want := step(nil, 2)
		for _, c := range []struct {
			splits []int
			procs  int
		}{{nil, 1}, {nil, 3}, {[]int{3, 4, 9}, 2}, {[]int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 1}, {[]int{5}, 3}} {
			if c.splits != nil && tinyConfigs[name].TieEmbeddings {
				continue
			}
			got := step(c.splits, c.procs)
			for i := range want {
				if !slices.Equal(got[i], want[i]) {
					t.Fatalf("%s (entropy term: %v): split at %v on %d cores: parameter %d differs from one call on 2 cores",
						name, e != nil, c.splits, c.procs, i)
				}
			}
		}
	}
}

// Releasing the trainer's accumulator and trimming the model's pass buffers
// between steps changes nothing a step computes; a Release with a gradient
// still waiting for Apply keeps it.
func TestReleaseAndTrimKeepSteps(t *testing.T) {
	ctx := context.Background()
	seqs, w := weightedSeqs(43, 5)
	run := func(idle bool) [][]float64 {
		m := newTiny(t, "llama-gqa", 43)
		m.SetEngine(EngineNative)
		tr, err := NewTrainer(m, OptimizerConfig{LearningRate: 1e-2, MaxGradNorm: 1})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := tr.Accumulate(ctx, seqs[:2], w[:2]); err != nil {
				t.Fatal(err)
			}
			if idle { // a gradient is pending: Release must keep it
				tr.Release()
				m.Trim()
			}
			if _, err := tr.Accumulate(ctx, seqs[2:], w[2:]); err != nil {
				t.Fatal(err)
			}
			if _, err := tr.Apply(ctx, 0); err != nil {
				t.Fatal(err)
			}
			if idle {
				tr.Release()
				m.Trim()
				if tr.hostAcc != nil {
					t.Fatal("Release after Apply kept the accumulator")
				}
				if len(m.arenas.idle) != 0 {
					t.Fatal("Trim kept idle arenas")
				}
			}
		}
		return m.allParams()
	}
	want, got := run(false), run(true)
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("parameter %d differs when the trainer releases and the model trims between steps", i)
		}
	}
}

// weightedSeqs draws n sequences of up to 6 prompt and 12 response tokens
// (vocabulary 16) with a normal weight per response token, from seed.
func weightedSeqs(seed uint64, n int) ([]Sequence, [][]float32) {
	rng := rand.New(rand.NewPCG(seed, 1))
	var seqs []Sequence
	var w [][]float32
	for range n {
		s := Sequence{Prompt: randomTokens(rng, 1+rng.IntN(6), 16), Response: randomTokens(rng, 1+rng.IntN(12), 16)}
		row := make([]float32, len(s.Response))
		for j := range row {
			row[j] = float32(rng.NormFloat64())
		}
		seqs, w = append(seqs, s), append(w, row)
	}
	return seqs, w
}
