package train

import (
	"context"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/internal/serverstandin"
	"github.com/hacrl/hacrl/metrics"
	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/rollout"
)

// withoutRolloutKeys is deterministic without the rollout engine's own
// metrics (rollout/…), which only a run through a server has.
func withoutRolloutKeys(recs []metrics.Record) []metrics.Record {
	out := deterministic(recs)
	for _, r := range out {
		for k := range r.Values {
			if strings.HasPrefix(k, "rollout/") {
				delete(r.Values, k)
			}
		}
	}
	return out
}

// serveAgent starts a loopback stand-in server of dialect for agent i of
// cfg and points the agent's rollout section at it.
func serveAgent(t *testing.T, cfg *config.Config, i int, dialect string) *serverstandin.Server {
	t.Helper()
	b, err := backend.New(backend.Choose(cfg.Backend))
	if err != nil {
		t.Fatal(err)
	}
	s := serverstandin.New(dialect, nil, b) // the first push gives it its weights
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	three := 3
	cfg.Agents[i].Rollout = &config.Rollout{Engine: "openai", URL: srv.URL, Model: cfg.Agents[i].Name, Dialect: dialect,
		Timeout: "1m", Concurrency: 3, Retries: &three, MaxStaleRetries: &three}
	return s
}

// checkWeightVersions asserts that every step's metrics and rollout log
// credit the remote agents' responses with the weights pushed after the
// step before, and the local ones with none.
func checkWeightVersions(t *testing.T, cfg *config.Config, remote map[string]bool) {
	t.Helper()
	for _, r := range must(metrics.ReadFile(filepath.Join(cfg.Out, metrics.FileName))) {
		if _, ok := r.Values["reward/mean"]; !ok || r.Agent == "" {
			continue
		}
		v, ok := r.Values["rollout/weight_version"]
		if ok != remote[r.Agent] || (ok && (v != float64(r.Step-1) || r.Values["rollout/resampled_stale"] != 0)) {
			t.Errorf("step %d %s: rollout/weight_version %v (%v), resampled %v", r.Step, r.Agent, v, ok, r.Values["rollout/resampled_stale"])
		}
		// The stand-in samples with the weights pushed, on the trainer's engine: its log-probs are
		// the trainer's scores, up to float32 rounding between decoding and scoring.
		if d, ok := r.Values["rollout/logprob_abs_diff"]; ok != remote[r.Agent] || d > 1e-5 {
			t.Errorf("step %d %s: rollout/logprob_abs_diff %v (%v), want ~0 for a server, none in-process", r.Step, r.Agent, d, ok)
		}
	}
	for step := 1; step <= cfg.Steps; step++ {
		recs, err := rollout.ReadLog(rollout.LogPath(cfg.Out, step))
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			want := ""
			if remote[rec.Agent] {
				want = fmt.Sprint(step - 1)
			}
			if rec.WeightVersion != want {
				t.Fatalf("step %d %s: rollout log weight_version %q, want %q", step, rec.Agent, rec.WeightVersion, want)
			}
		}
	}
}

// TestRemoteRolloutEngine: a run whose agents gpt-char and llama-char
// sample through hacrl serve's shapes (llama-bpe in-process) gives bit for
// bit the metrics of the same run sampling in-process, since each
// response's request carries the seed of its in-process stream; each
// server gets the weights before the first step and after every update of
// its agent, in order, and the responses report those versions.
func TestRemoteRolloutEngine(t *testing.T) {
	const steps = 2
	dir := t.TempDir()
	for _, sub := range []string{"local", "remote"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	local := tinyConfig(t, filepath.Join(dir, "local"), "hacpo", steps)
	trainWith(t, local, Options{})

	cfg := tinyConfig(t, filepath.Join(dir, "remote"), "hacpo", steps)
	cfg.Rollouts.Every = 1
	servers := []*serverstandin.Server{serveAgent(t, cfg, 0, "hacrl"), serveAgent(t, cfg, 1, "hacrl")}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	run, err := New(context.Background(), cfg, Options{Observer: &recorder{}})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range servers { // a server samples within its tokenizer's ids
		s.Vocab = run.Agents()[i].Sampling.Vocab
	}
	if _, err := run.Train(context.Background()); err != nil {
		t.Fatal(err)
	}

	want := withoutRolloutKeys(must(metrics.ReadFile(filepath.Join(local.Out, metrics.FileName))))
	if got := withoutRolloutKeys(must(metrics.ReadFile(filepath.Join(cfg.Out, metrics.FileName)))); !reflect.DeepEqual(got, want) {
		t.Errorf("metrics through servers differ from in-process:\n got %v\nwant %v", got, want)
	}
	checkWeightVersions(t, cfg, map[string]bool{"gpt-char": true, "llama-char": true})
	for i, s := range servers {
		var want []serverstandin.Call
		for v := range steps + 1 {
			d := filepath.Join(rolloutWeightsDir(must(filepath.Abs(cfg.Out)), cfg.Agents[i].Name), fmt.Sprintf("v%d", v))
			want = append(want, serverstandin.Call{Path: "/update_weights_from_disk", ModelPath: d, Version: fmt.Sprint(v)})
		}
		if got := s.Calls(); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: weight calls %+v\nwant %+v", cfg.Agents[i].Name, got, want)
		}
		if n, want := s.Requests(), steps*cfg.Batch.PromptsPerStep*cfg.Batch.ResponsesPerPrompt; n != want {
			t.Errorf("%s: %d sampling requests, want %d (one per response)", cfg.Agents[i].Name, n, want)
		}
	}
}

// TestRemoteRolloutEngineVLLM: an agent sampling through vLLM's shapes,
// its weights dir the link the server started from: each push swaps the
// link to a new version beside it, has the server reload from its path and
// reset its prefix cache, in order, and leaves one version.
func TestRemoteRolloutEngineVLLM(t *testing.T) {
	const steps = 2
	dir := t.TempDir()
	cfg := tinyConfig(t, dir, "hacpo", steps)
	cfg.Rollouts.Every = 1
	s := serveAgent(t, cfg, 1, "vllm")
	link := filepath.Join(dir, "vllm-model")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	s.ModelPath, cfg.Agents[1].Rollout.WeightsDir = link, link
	run, err := New(context.Background(), cfg, Options{Observer: &recorder{}})
	if err != nil {
		t.Fatal(err)
	}
	s.Vocab = run.Agents()[1].Sampling.Vocab
	if _, err := run.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	var want []serverstandin.Call
	for v := range steps + 1 {
		want = append(want, serverstandin.Call{Path: "/collective_rpc", ModelPath: fmt.Sprintf("%s.v%d", link, v)}, serverstandin.Call{Path: "/reset_prefix_cache"})
	}
	if got := s.Calls(); !reflect.DeepEqual(got, want) {
		t.Errorf("vLLM weight calls %+v\nwant %+v", got, want)
	}
	if target, err := os.Readlink(link); err != nil || target != fmt.Sprintf("vllm-model.v%d", steps) {
		t.Errorf("the link points to %q (%v)", target, err)
	}
	checkWeightVersions(t, cfg, map[string]bool{"llama-char": true})
}

// TestRemoteRolloutEngineErrors: a server that fails stops the run with an
// error naming the step, the agent, the server and what went wrong.
func TestRemoteRolloutEngineErrors(t *testing.T) {
	b, err := backend.New(backend.Choose("go:ops_sequential"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		fault func(*serverstandin.Server)
		want  string
	}{
		{"reload refused", nil, "agent gpt-char: rollout server"},
		{"5xx", func(s *serverstandin.Server) {
			s.Answer = func(int) (int, string, bool) { return 502, "bad gateway", true }
		}, "step 1: agent gpt-char: sampling: rollout server"},
		{"stale forever", func(s *serverstandin.Server) { s.Stale = 1 << 20 }, "sampled with stale weights after 3 re-samples"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := tinyConfig(t, dir, "hacpo", 1)
			s := serverstandin.New("sglang", nil, b)
			if tc.fault != nil {
				tc.fault(s)
			}
			srv := httptest.NewServer(s)
			defer srv.Close()
			three := 3
			cfg.Agents[0].Rollout = &config.Rollout{Engine: "openai", URL: srv.URL, Dialect: "sglang", Timeout: "1m", Concurrency: 2, Retries: &three, MaxStaleRetries: &three}
			if tc.fault == nil { // the server cannot load what it is given
				cfg.Agents[0].Rollout.URL = srv.URL + "/nowhere"
			}
			run, err := New(context.Background(), cfg, Options{Observer: &recorder{}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = run.Train(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestSaveForServerLoRA: a LoRA agent goes to a server as a plain
// checkpoint with its adapters merged, which computes what the agent
// computes (within float32 rounding), while the agent keeps its adapters.
func TestSaveForServerLoRA(t *testing.T) {
	dir := t.TempDir()
	cfg := loraTinyConfig(t, dir, 2)
	run, err := New(context.Background(), cfg, Options{Observer: &recorder{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := run.Train(ctx); err != nil { // moves the adapters off their zero start
		t.Fatal(err)
	}
	a := run.Agents()[0]
	seqs := []model.Sequence{{Prompt: []int{1, 5, 9}, Response: []int{4, 7, 2}}, {Prompt: []int{3, 3}, Response: []int{8}}}
	out := filepath.Join(dir, "server")
	if err := saveForServer(a, out); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Model.LoRA(); !ok {
		t.Fatal("the agent lost its adapters")
	}
	if model.IsAdapterDir(out) {
		t.Fatal("the server got an adapter directory, want merged weights")
	}
	b := must(backend.New(backend.Choose(cfg.Backend)))
	merged := must(model.Load(b, out))
	got, want := must(merged.Score(ctx, seqs, false)), must(a.Model.Score(ctx, seqs, false))
	for i := range want.LogProbs {
		for j := range want.LogProbs[i] {
			if d := math.Abs(float64(got.LogProbs[i][j] - want.LogProbs[i][j])); d > 1e-4 {
				t.Fatalf("seq %d token %d: merged %g, agent %g", i, j, got.LogProbs[i][j], want.LogProbs[i][j])
			}
		}
	}
	if base := must(a.Model.Base().Score(ctx, seqs, false)); reflect.DeepEqual(base.LogProbs, want.LogProbs) {
		t.Fatal("the adapters did not move: the test cannot tell merged from base weights")
	}
	if _, err := os.Stat(filepath.Join(out, "tokenizer.json")); err != nil {
		t.Error(err)
	}

	// For hacrl serve, the adapters alone, which it loads onto the base.
	a.pushAdapters = true
	out = filepath.Join(dir, "server-adapters")
	if err := saveForServer(a, out); err != nil {
		t.Fatal(err)
	}
	if !model.IsAdapterDir(out) {
		t.Fatal("hacrl serve got no adapter directory")
	}
	onBase := must(model.Load(b, a.BaseDir))
	if err := onBase.LoadAdapters(out); err != nil {
		t.Fatal(err)
	}
	if got := must(onBase.Score(ctx, seqs, false)); !reflect.DeepEqual(got.LogProbs, want.LogProbs) {
		t.Errorf("base + pushed adapters %v, agent %v", got.LogProbs, want.LogProbs)
	}
}

// TestRemoteRolloutEngineResume: a run resumed with its agent on another
// server (the rollout section is not part of the resume hash) first pushes
// the checkpoint's weights with the steps done as their version, and ends
// with the metrics of an uninterrupted in-process run.
func TestRemoteRolloutEngineResume(t *testing.T) {
	dir := t.TempDir()
	for _, sub := range []string{"local", "remote"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	local := tinyConfig(t, filepath.Join(dir, "local"), "hacpo", 2)
	trainWith(t, local, Options{})

	first := tinyConfig(t, filepath.Join(dir, "remote"), "hacpo", 1)
	s1 := serveAgent(t, first, 0, "hacrl")
	run, err := New(context.Background(), first, Options{Observer: &recorder{}})
	if err != nil {
		t.Fatal(err)
	}
	s1.Vocab = run.Agents()[0].Sampling.Vocab
	if _, err := run.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	second := tinyConfig(t, filepath.Join(dir, "remote"), "hacpo", 2)
	s := serveAgent(t, second, 0, "hacrl")
	run, err = New(context.Background(), second, Options{Resume: true, Observer: &recorder{}})
	if err != nil {
		t.Fatal(err)
	}
	s.Vocab = run.Agents()[0].Sampling.Vocab
	if _, err := run.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	var versions []string
	for _, c := range s.Calls() {
		versions = append(versions, c.Version)
	}
	if !reflect.DeepEqual(versions, []string{"1", "2"}) {
		t.Errorf("the resumed run pushed versions %v, want [1 2]", versions)
	}
	stepTwo := func(out string) (recs []metrics.Record) {
		for _, r := range withoutRolloutKeys(must(metrics.ReadFile(filepath.Join(out, metrics.FileName)))) {
			if r.Step == 2 {
				recs = append(recs, r)
			}
		}
		return recs
	}
	// (The first part ended with an evaluation at step 1 the uninterrupted run does not make.)
	if got, want := stepTwo(second.Out), stepTwo(local.Out); len(want) == 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("resumed through a server: step 2 metrics\n got %v\nwant %v", got, want)
	}
}

// TestRemoteRolloutEngineStale: responses a server answers with the weights
// before the last push are sampled again — counted in
// rollout/resampled_stale — and the run learns exactly what it learns from
// fresh ones.
func TestRemoteRolloutEngineStale(t *testing.T) {
	const steps = 2
	dir := t.TempDir()
	for _, sub := range []string{"local", "remote"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	local := tinyConfig(t, filepath.Join(dir, "local"), "hacpo", steps)
	trainWith(t, local, Options{})
	cfg := tinyConfig(t, filepath.Join(dir, "remote"), "hacpo", steps)
	s := serveAgent(t, cfg, 0, "hacrl")
	s.Stale = 2 // the first two answers after each reload come from the weights before it
	run, err := New(context.Background(), cfg, Options{Observer: &recorder{}})
	if err != nil {
		t.Fatal(err)
	}
	s.Vocab = run.Agents()[0].Sampling.Vocab
	if _, err := run.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs := must(metrics.ReadFile(filepath.Join(cfg.Out, metrics.FileName)))
	want := withoutRolloutKeys(must(metrics.ReadFile(filepath.Join(local.Out, metrics.FileName))))
	if got := withoutRolloutKeys(recs); !reflect.DeepEqual(got, want) {
		t.Errorf("metrics with stale answers re-sampled differ from in-process")
	}
	seen := 0
	for _, r := range recs {
		if v, ok := r.Values["rollout/resampled_stale"]; ok {
			seen++
			if v != 2 {
				t.Errorf("step %d %s: rollout/resampled_stale %v, want 2", r.Step, r.Agent, v)
			}
		}
	}
	if seen != steps {
		t.Errorf("rollout/resampled_stale in %d records, want %d", seen, steps)
	}
}
