package model

import (
	"context"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// streamOf is the random stream Generate gives a lone prompt when called
// with rand.New(rand.NewPCG(seed, 0)).
func streamOf(seed uint64) *rand.Rand {
	return SeedStream(RowSeeds(rand.New(rand.NewPCG(seed, 0)), 1)[0], 0)
}

// Generate's tokens do not depend on how many sequences it decodes at once:
// bit for bit on the native engine (whose Batch starts each prompt in the
// row a finished one leaves), within float rounding of the log-probs on the
// graph engine (chunks).
func TestGenerateSameWhateverMaxBatch(t *testing.T) {
	ctx := context.Background()
	opts := []SampleOptions{
		{MaxNewTokens: 12, Temperature: 1, Stop: []int{3}},
		{MaxNewTokens: 9, Temperature: 0.7, TopK: 5, Stop: []int{3, 7}},
		{MaxNewTokens: 30, Temperature: 1.3, TopP: 0.8},
		{MaxNewTokens: 7, Greedy: true, Stop: []int{2}},
	}
	for _, name := range []string{"qwen3-gqa", "gpt-tanh", "llama3-rope"} {
		for _, engine := range []Engine{EngineNative, EngineGraph} {
			m := newTiny(t, name, 5)
			m.SetEngine(engine)
			rng := rand.New(rand.NewPCG(9, 9))
			var prompts [][]int
			for range 7 {
				prompts = append(prompts, randomTokens(rng, 1+rng.IntN(12), 16))
			}
			for _, opt := range opts {
				var want []Sample
				for _, rows := range []int{0, 1, 3, 7} {
					opt.MaxBatch = rows
					got, err := m.Generate(ctx, prompts, opt, rand.New(rand.NewPCG(2, 4)))
					if err != nil {
						t.Fatal(err)
					}
					if want == nil {
						want = got
						continue
					}
					if engine == EngineNative && !reflect.DeepEqual(got, want) {
						t.Fatalf("%s native %+v: MaxBatch %d gives %v, all at once %v", name, opt, rows, got, want)
					}
					for i := range got {
						if !slices.Equal(got[i].Tokens, want[i].Tokens) || got[i].Stopped != want[i].Stopped {
							t.Fatalf("%s %s %+v: MaxBatch %d row %d: %v, all at once %v", name, engine, opt, rows, i, got[i].Tokens, want[i].Tokens)
						}
						for j := range got[i].LogProbs {
							if d := math.Abs(float64(got[i].LogProbs[j] - want[i].LogProbs[j])); d > 1e-5 {
								t.Errorf("%s %s: MaxBatch %d row %d token %d: log-prob %v, all at once %v", name, engine, rows, i, j, got[i].LogProbs[j], want[i].LogProbs[j])
							}
						}
					}
				}
			}
		}
	}
}

// Sequences that join a running Batch at different steps, each with its own
// options and stream, and leave it at different steps (one cancelled), get
// exactly the tokens each gets from Generate alone.
func TestBatchJoinsAndLeaves(t *testing.T) {
	ctx := context.Background()
	m := newTiny(t, "qwen3-gqa", 8)
	m.SetEngine(EngineNative)
	type job struct {
		at     int // the step it is added before
		prompt []int
		opt    SampleOptions
		seed   uint64
	}
	jobs := []job{
		{0, []int{1, 2, 3}, SampleOptions{MaxNewTokens: 10, Temperature: 1}, 1},
		{0, []int{4}, SampleOptions{MaxNewTokens: 4, Greedy: true}, 2},
		{0, []int{5, 6, 7, 8, 9, 10}, SampleOptions{MaxNewTokens: 20, Temperature: 0.8, TopK: 4, Stop: []int{3}}, 3},
		{2, []int{11, 12}, SampleOptions{MaxNewTokens: 6, Temperature: 1.2, TopP: 0.7}, 4},
		{3, []int{13}, SampleOptions{MaxNewTokens: 25, Temperature: 1}, 5},
		{9, []int{14, 15, 1}, SampleOptions{MaxNewTokens: 8, Temperature: 1, Stop: []int{2, 6}}, 6},
	}
	const cancelled = 4 // job 4 is cancelled after its 3rd token
	b, err := m.NewBatch(2, m.cfg.MaxSeq)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got := map[int]*Sample{}
	seqOf := map[int]int{} // Add's id → job
	for step := 0; step < 200; step++ {
		for j, jb := range jobs {
			if jb.at == step {
				id, err := b.Add(jb.prompt, jb.opt, streamOf(jb.seed))
				if err != nil {
					t.Fatal(err)
				}
				seqOf[id], got[j] = j, &Sample{}
			}
		}
		if b.Len() == 0 && step > 9 {
			break
		}
		tokens, err := b.Step(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(tokens) > 2 {
			t.Fatalf("step %d decoded %d sequences in a batch of 2 rows", step, len(tokens))
		}
		for _, tk := range tokens {
			s := got[seqOf[tk.Seq]]
			s.Tokens, s.LogProbs, s.Stopped = append(s.Tokens, tk.ID), append(s.LogProbs, tk.LogProb), tk.Stopped
			if seqOf[tk.Seq] == cancelled && len(s.Tokens) == 3 {
				if !b.Cancel(tk.Seq) || b.Cancel(tk.Seq) {
					t.Fatal("Cancel of a live sequence: want true once, then false")
				}
			}
		}
	}
	if b.Len() != 0 {
		t.Fatalf("%d sequences left after 200 steps", b.Len())
	}
	for j, jb := range jobs {
		alone, err := m.Generate(ctx, [][]int{jb.prompt}, jb.opt, rand.New(rand.NewPCG(jb.seed, 0)))
		if err != nil {
			t.Fatal(err)
		}
		want := alone[0]
		if j == cancelled {
			want = Sample{Tokens: want.Tokens[:3], LogProbs: want.LogProbs[:3]}
		}
		if !reflect.DeepEqual(*got[j], want) {
			t.Errorf("job %d: in the batch %+v, alone %+v", j, *got[j], want)
		}
	}
}

// Top log-probs: sorted, a prefix of the whole vocabulary's, summing to one
// over the whole vocabulary, holding the sampled token's log-prob, and
// limited to Vocab.
func TestBatchTopLogProbs(t *testing.T) {
	ctx := context.Background()
	m := newTiny(t, "llama-gqa", 4)
	m.SetEngine(EngineNative)
	for _, k := range []int{16, 3} {
		for _, vocab := range []int{0, 12} {
			b, err := m.NewBatch(1, 20)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.Add([]int{1, 2}, SampleOptions{MaxNewTokens: 5, Temperature: 1, TopLogProbs: k, Vocab: vocab}, streamOf(1)); err != nil {
				t.Fatal(err)
			}
			for b.Len() > 0 {
				tokens, err := b.Step(ctx)
				if err != nil {
					t.Fatal(err)
				}
				tk := tokens[0]
				limit := 16
				if vocab > 0 {
					limit = vocab
				}
				if len(tk.Top) != min(k, limit) {
					t.Fatalf("k %d vocab %d: %d top log-probs", k, vocab, len(tk.Top))
				}
				sum := 0.0
				for i, e := range tk.Top {
					if e.ID >= limit || i > 0 && e.LogProb > tk.Top[i-1].LogProb {
						t.Fatalf("k %d vocab %d: top %v out of order or past the vocabulary", k, vocab, tk.Top)
					}
					if e.ID == tk.ID && e.LogProb != tk.LogProb {
						t.Errorf("token %d: log-prob %v, its top entry %v", tk.ID, tk.LogProb, e.LogProb)
					}
					sum += math.Exp(float64(e.LogProb))
				}
				if k == 16 && vocab == 0 && math.Abs(sum-1) > 1e-5 {
					t.Errorf("top log-probs over the whole vocabulary sum to %v, want 1", sum)
				}
			}
			b.Close()
		}
	}
}

func TestBatchErrors(t *testing.T) {
	m := newTiny(t, "gpt-gelu", 1)
	m.SetEngine(EngineGraph)
	if _, err := m.NewBatch(2, 10); err == nil || !strings.Contains(err.Error(), "graph engine") {
		t.Errorf("NewBatch on the graph engine: %v", err)
	}
	m.SetEngine(EngineNative)
	for _, tc := range []struct{ rows, slots int }{{0, 10}, {2, 0}, {2, 41}} {
		if _, err := m.NewBatch(tc.rows, tc.slots); err == nil {
			t.Errorf("NewBatch(%d, %d): no error", tc.rows, tc.slots)
		}
	}
	b, err := m.NewBatch(2, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		prompt []int
		opt    SampleOptions
		rng    *rand.Rand
		want   string
	}{
		{make([]int, 11), SampleOptions{MaxNewTokens: 1, Greedy: true}, nil, "10 slots"},
		{[]int{1}, SampleOptions{MaxNewTokens: 1, Temperature: 1}, nil, "rng is nil"},
		{[]int{99}, SampleOptions{MaxNewTokens: 1, Greedy: true}, nil, "outside the vocabulary"},
		{[]int{1}, SampleOptions{MaxNewTokens: 1, Greedy: true, TopLogProbs: -1}, nil, "TopLogProbs"},
	} {
		if _, err := b.Add(tc.prompt, tc.opt, tc.rng); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Add(%v, %+v): %v, want an error with %q", tc.prompt, tc.opt, err, tc.want)
		}
	}
	// A prompt of 8 in 10 slots gets at most 3 new tokens.
	if _, err := b.Add(make([]int, 8), SampleOptions{MaxNewTokens: 20, Greedy: true}, nil); err != nil {
		t.Fatal(err)
	}
	n := 0
	for b.Len() > 0 {
		tokens, err := b.Step(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		n += len(tokens)
	}
	if n != 3 {
		t.Errorf("a prompt of 8 in 10 slots got %d new tokens, want 3", n)
	}
}
