package train

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hacrl/hacrl/metrics"
	"github.com/hacrl/hacrl/rollout"
)

// memExchange is an Exchange within one process: the in-memory stand-in
// for the bus, which package bus and cmd/hacrl test over NATS.
type memExchange struct {
	agents []string
	mu     sync.Mutex
	cond   *sync.Cond
	steps  map[int]map[string][]byte
	stops  map[int][]string // the agents that asked to stop after each step
	keep   map[string]int
}

func newMemExchange(agents []string) *memExchange {
	e := &memExchange{agents: agents, steps: map[int]map[string][]byte{}, stops: map[int][]string{}, keep: map[string]int{}}
	e.cond = sync.NewCond(&e.mu)
	return e
}

func (e *memExchange) Share(ctx context.Context, step int, agent string, payload []byte, stop bool) (map[string][]byte, []string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.steps[step]
	if s == nil {
		s = map[string][]byte{}
		e.steps[step] = s
	}
	old, shared := s[agent]
	if shared && !bytes.Equal(old, payload) {
		return nil, nil, fmt.Errorf("agent %s shared step %d twice with different payloads", agent, step)
	}
	if stop && !shared {
		e.stops[step] = append(e.stops[step], agent)
	}
	s[agent] = payload
	e.cond.Broadcast()
	deadline := time.Now().Add(time.Minute)
	for len(s) < len(e.agents) {
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("step %d: waited a minute for %d agents, have %d", step, len(e.agents), len(s))
		}
		go func() { time.Sleep(100 * time.Millisecond); e.cond.Broadcast() }()
		e.cond.Wait()
	}
	return s, slices.Sorted(slices.Values(e.stops[step])), nil
}

func (e *memExchange) Keep(ctx context.Context, agent string, from int) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.keep[agent] = from
	return nil
}

// TestMembersMatchOneProcess: the agents of a run trained as member
// processes (here goroutines, each its own Run and OUT, joined by an
// in-memory exchange) give every agent the metrics and rollout logs of the
// single-process run, bit for bit, with eval and checkpoints on the way;
// under both semantics (the original one balances the step by the sources'
// prompt lengths, which travel with the rollouts).
func TestMembersMatchOneProcess(t *testing.T) {
	for _, semantics := range []string{"", "original"} {
		t.Run("semantics="+semantics, func(t *testing.T) { testMembers(t, semantics, 0) })
	}
	// Each member shapes its own agent's rewards; the others' come shaped.
	t.Run("overlong_penalty", func(t *testing.T) { testMembers(t, "", 0.5) })
}

func testMembers(t *testing.T, semantics string, overlong float64) {
	dir := t.TempDir()
	cfg := tinyConfig(t, dir, "hacpo", 3)
	cfg.Rollouts.Every = 2
	cfg.Method.Semantics = semantics
	if overlong > 0 {
		cfg.Method.OverlongPenalty = &overlong
	}
	mustTrain(t, cfg)
	want, err := metrics.ReadFile(filepath.Join(cfg.Out, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if overlong > 0 && !slices.ContainsFunc(want, func(r metrics.Record) bool { return r.Values["reward/overlong_penalty"] > 0 }) {
		t.Fatal("no response was penalised: the run does not exercise the overlong penalty")
	}

	names := cfg.AgentNames()
	ex := newMemExchange(names)
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		c := *cfg
		c.Out = filepath.Join(dir, "members", name)
		wg.Go(func() {
			run, err := New(context.Background(), &c, Options{Member: &Member{Agent: name, Exchange: ex}})
			if err == nil {
				_, err = run.Train(context.Background())
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("member %s: %v", names[i], err)
		}
	}
	for _, name := range names {
		out := filepath.Join(dir, "members", name)
		got, err := metrics.ReadFile(filepath.Join(out, "metrics.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if g, w := deterministic(metrics.OfAgent(got, name)), deterministic(metrics.OfAgent(want, name)); !reflect.DeepEqual(g, w) {
			t.Fatalf("member %s: metrics differ from the single-process run's:\n got %v\nwant %v", name, g, w)
		}
		// Its rollout log is the whole pool, with what it made of each response.
		g := readLog(t, rollout.LogPath(out, 2))
		w := readLog(t, rollout.LogPath(cfg.Out, 2))
		for i := range w {
			var mine []rollout.LearnerUse
			for _, u := range w[i].Learners {
				if u.Learner == name {
					mine = append(mine, u)
				}
			}
			w[i].Learners = mine
			if len(g[i].Learners) == 0 {
				g[i].Learners = nil
			}
		}
		if len(g) != len(w) || len(w) == 0 {
			t.Fatalf("member %s: step-2 rollout log has %d records, want %d", name, len(g), len(w))
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("member %s: the step-2 rollout log differs from the single-process run's", name)
		}
		if ex.keep[name] != 2 { // checkpoints every step, keeping 2: steps 2 and 3 at the end
			t.Errorf("member %s told the exchange to keep from step %d, want 2", name, ex.keep[name])
		}
	}
}

func readLog(t *testing.T, path string) []rollout.Record {
	t.Helper()
	recs, err := rollout.ReadLog(path)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// BenchmarkStepPayload encodes and decodes one agent's part of a
// paper-sized step: 128 prompts × 8 responses of 4,096 tokens, each with its
// id, old log-prob and text (4 bytes a token). Run with
//
//	GOEXPERIMENT=simd go test ./train -run '^$' -bench StepPayload -benchtime 5x
func BenchmarkStepPayload(b *testing.B) {
	const prompts, G, tokens = 128, 8, 4096
	rng := rand.New(rand.NewPCG(1, 2))
	p := stepPayload{Version: payloadVersion, Agent: "qwen", PromptTokens: make([]int, prompts)}
	for i := range prompts {
		p.PromptTokens[i] = 200
		for range G {
			ro := rollout.Rollout{Prompt: i, Tokens: make([]int, tokens), OldLogProbs: make([]float32, tokens), Reward: float64(rng.IntN(2)), Stopped: true}
			text := make([]byte, 4*tokens)
			for n := range ro.Tokens {
				ro.Tokens[n] = rng.IntN(152_000)
				ro.OldLogProbs[n] = -rng.Float32() * 12
			}
			for n := range text {
				text[n] = byte('a' + rng.IntN(26))
			}
			ro.Text = string(text)
			p.Rollouts = append(p.Rollouts, ro)
		}
	}
	var size int
	b.ResetTimer()
	for b.Loop() {
		data, err := encodePayload(p)
		if err != nil {
			b.Fatal(err)
		}
		size = len(data)
		var q stepPayload
		if err := gob.NewDecoder(bytes.NewReader(data)).Decode(&q); err != nil {
			b.Fatal(err)
		}
		if err := checkPayload(&q, 0, "qwen", 0, prompts, G, false); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(size)/1e6, "MB")
}

// hookedExchange runs before and after hooks around each Share.
type hookedExchange struct {
	Exchange
	before, after func(step int)
}

func (h hookedExchange) Share(ctx context.Context, step int, agent string, payload []byte, stop bool) (map[string][]byte, []string, error) {
	if h.before != nil {
		h.before(step)
	}
	got, by, err := h.Exchange.Share(ctx, step, agent, payload, stop)
	if h.after != nil {
		h.after(step)
	}
	return got, by, err
}

// TestMembersStopTogether: of three member processes, the first shares
// step 2 while the last still updates step 1, and only the last is
// interrupted. It asks with step 2, the next it shares; all three finish
// step 2, checkpoint there (though checkpoint.every would not) and return
// ErrInterrupted naming it. Resumed, they end with the single-process
// run's metrics.
func TestMembersStopTogether(t *testing.T) {
	dir := t.TempDir()
	cfg := tinyConfig(t, dir, "hacpo", 4)
	cfg.Checkpoint.Every = 3
	mustTrain(t, cfg)
	want, err := metrics.ReadFile(filepath.Join(cfg.Out, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	names := cfg.AgentNames()
	ahead, behind := names[0], names[len(names)-1]

	train := func(ex func(name string) Exchange, resume bool, ctxs map[string]context.Context) []error {
		errs := make([]error, len(names))
		var wg sync.WaitGroup
		for i, name := range names {
			c := *cfg
			c.Out = filepath.Join(dir, "members", name)
			ctx := ctxs[name]
			if ctx == nil {
				ctx = context.Background()
			}
			wg.Go(func() {
				run, err := New(ctx, &c, Options{Resume: resume, Member: &Member{Agent: name, Exchange: ex(name)}})
				if err == nil {
					_, err = run.Train(ctx)
				}
				errs[i] = err
			})
		}
		wg.Wait()
		return errs
	}

	mem := newMemExchange(names)
	interrupt, cancel := context.WithCancel(context.Background())
	defer cancel()
	aheadAtStep2 := make(chan struct{})
	errs := train(func(name string) Exchange {
		switch name {
		case ahead: // entering step 2's exchange: the last member is still in step 1
			return hookedExchange{Exchange: mem, before: func(step int) {
				if step == 1 {
					cancel()
					close(aheadAtStep2)
				}
			}}
		case behind: // held after step 1's exchange until then
			return hookedExchange{Exchange: mem, after: func(step int) {
				if step == 0 {
					select {
					case <-aheadAtStep2:
					case <-time.After(time.Minute):
						t.Errorf("%s never reached step 2's exchange", ahead)
					}
				}
			}}
		}
		return mem
	}, false, map[string]context.Context{behind: interrupt})
	for i, err := range errs {
		if !errors.Is(err, ErrInterrupted) || !strings.Contains(err.Error(), "stopped after step 2, as "+behind+" asked") {
			t.Fatalf("member %s: %v, want ErrInterrupted after step 2, as %s asked", names[i], err, behind)
		}
		if step, ok := LatestCheckpoint(filepath.Join(dir, "members", names[i])); !ok || step != 2 {
			t.Fatalf("member %s: newest checkpoint at step %d (%v), want 2", names[i], step, ok)
		}
	}

	fresh := newMemExchange(names)
	for i, err := range train(func(string) Exchange { return fresh }, true, nil) {
		if err != nil {
			t.Fatalf("member %s resumed: %v", names[i], err)
		}
	}
	for _, name := range names {
		got, err := metrics.ReadFile(filepath.Join(dir, "members", name, "metrics.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if g, w := deterministic(metrics.OfAgent(got, name)), deterministic(metrics.OfAgent(want, name)); !reflect.DeepEqual(g, w) {
			t.Fatalf("member %s stopped and resumed: metrics differ from the single-process run's:\n got %v\nwant %v", name, g, w)
		}
	}
}
