package rolloutengine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gomlx/compute"
	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/internal/serverstandin"
	"github.com/hacrl/hacrl/model"
)

const tinyAgent = "../examples/agents/gpt-char"

func tinyModel(t *testing.T) (*model.Model, compute.Backend) {
	t.Helper()
	b, err := backend.New(backend.Choose(""))
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(b, tinyAgent)
	if err != nil {
		t.Fatal(err)
	}
	m.SetEngine(model.EngineNative)
	return m, b
}

// tinyPrompts are 12 prompts of the tiny agent's vocabulary, repeated as
// a step's G responses per prompt are.
func tinyPrompts() [][]int {
	var ps [][]int
	for i := range 4 {
		for range 3 {
			ps = append(ps, []int{1, 10 + i, 20 + 2*i, 30, 11})
		}
	}
	return ps
}

var tinyOptions = model.SampleOptions{MaxNewTokens: 12, Temperature: 1, TopP: 1, Stop: []int{2}, Vocab: 100}

// standin starts a loopback server of dialect sampling with m, and a
// client for it.
func standin(t *testing.T, dialect string, m *model.Model, b compute.Backend, edit func(*serverstandin.Server, *Config)) (*serverstandin.Server, *Client) {
	t.Helper()
	s := serverstandin.New(dialect, m, b)
	s.Vocab = tinyOptions.Vocab
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	cfg := Config{Agent: "gpt-char", URL: srv.URL, Dialect: dialect, Model: "gpt-char", WeightsDir: filepath.Join(t.TempDir(), "weights"),
		Timeout: 20 * time.Second, Concurrency: 4, Retries: 2, MaxStaleRetries: 2, MaxSeq: m.Config().MaxSeq, Vocab: m.Config().Vocab}
	if edit != nil {
		edit(s, &cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

// TestSameDrawsAsLocal: through a server that samples a request with seed s
// from model.SeedStream(s, 0), as hacrl serve does, the client gets exactly
// the tokens, log-probs and stops of in-process sampling from the same
// random source; greedy decoding too, also through vLLM's shapes (whose
// seeds are cut to int64's range, so its sampled draws are its own).
func TestSameDrawsAsLocal(t *testing.T) {
	m, b := tinyModel(t)
	ctx := context.Background()
	prompts := tinyPrompts()
	for _, opt := range []model.SampleOptions{tinyOptions, {MaxNewTokens: 6, Greedy: true, Stop: []int{2}, Vocab: 100}, {MaxNewTokens: 8, Temperature: 0.7, TopK: 5, TopP: 0.9, Stop: []int{2}, Vocab: 100}} {
		want, err := Local{m}.Sample(ctx, prompts, opt, rand.New(rand.NewPCG(7, 8)))
		if err != nil {
			t.Fatal(err)
		}
		for _, dialect := range []string{VLLM, Hacrl} {
			_, c := standin(t, dialect, m, b, nil)
			got, err := c.Sample(ctx, prompts, opt, rand.New(rand.NewPCG(7, 8)))
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if dialect == VLLM && !opt.Greedy {
					break
				}
				if !reflect.DeepEqual(got[i].Sample, want[i].Sample) {
					t.Fatalf("%s %+v: row %d: server %+v, in-process %+v", dialect, opt, i, got[i].Sample, want[i].Sample)
				}
			}
		}
	}
	// SGLang takes no seed: its responses are valid but its own.
	_, c := standin(t, SGLang, m, b, nil)
	got, err := c.Sample(ctx, prompts, tinyOptions, rand.New(rand.NewPCG(7, 8)))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(prompts) || got[0].WeightVersion != "initial" {
		t.Errorf("SGLang: %d samples, version %q", len(got), got[0].WeightVersion)
	}
}

// saveCheckpoint returns a save function writing the model of checkpoint
// dir as a Hugging Face checkpoint.
func saveCheckpoint(b compute.Backend, dir string) func(string) error {
	return func(out string) error {
		m, err := model.Load(b, dir)
		if err != nil {
			return err
		}
		return m.SaveWith(out, model.SaveOptions{Exact: true})
	}
}

// versions are the checkpoints pushed in turn: two different tiny models of
// one architecture and tokenizer.
var versions = []string{"../examples/agents/gpt-char-early", tinyAgent, "../examples/agents/gpt-char-early"}

// TestPushFromDisk: for SGLang and hacrl serve every push writes a new
// version directory, asks the server to load it with its version, and
// removes the older ones; the server then samples with the new weights and
// says so, and the client attributes each response its version.
func TestPushFromDisk(t *testing.T) {
	m, b := tinyModel(t)
	early, err := model.Load(b, versions[0])
	if err != nil {
		t.Fatal(err)
	}
	early.SetEngine(model.EngineNative)
	ctx := context.Background()
	for _, dialect := range []string{SGLang, Hacrl} {
		s, c := standin(t, dialect, m, b, nil)
		var want []serverstandin.Call
		for k, ckpt := range versions {
			v := fmt.Sprint(k + 1)
			if err := c.Push(ctx, v, saveCheckpoint(b, ckpt)); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(c.cfg.WeightsDir, "v"+v)
			want = append(want, serverstandin.Call{Path: "/update_weights_from_disk", ModelPath: dir, Version: v})
			if got := s.Calls(); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: calls %+v, want %+v", dialect, got, want)
			}
			entries, err := os.ReadDir(c.cfg.WeightsDir)
			if err != nil || len(entries) != 1 || entries[0].Name() != "v"+v {
				t.Fatalf("%s: weights dir holds %v (%v), want only v%s", dialect, entries, err, v)
			}
			got, err := c.Sample(ctx, tinyPrompts()[:3], tinyOptions, rand.New(rand.NewPCG(1, 2)))
			if err != nil {
				t.Fatal(err)
			}
			if got[0].WeightVersion != v || c.Version() != v {
				t.Errorf("%s: sampled with version %q (client %q), want %q", dialect, got[0].WeightVersion, c.Version(), v)
			}
		}
		// The server runs the pushed weights: with hacrl's seeds, the draws of gpt-char-early.
		if dialect == Hacrl {
			got, err := c.Sample(ctx, tinyPrompts(), tinyOptions, rand.New(rand.NewPCG(3, 4)))
			if err != nil {
				t.Fatal(err)
			}
			want, _ := Local{early}.Sample(ctx, tinyPrompts(), tinyOptions, rand.New(rand.NewPCG(3, 4)))
			for i := range want {
				if !reflect.DeepEqual(got[i].Sample, want[i].Sample) {
					t.Fatalf("row %d after the push: %+v, want gpt-char-early's %+v", i, got[i].Sample, want[i].Sample)
				}
			}
		}
	}
}

// TestPushVLLM: for vLLM the weights dir is the link the server started
// from: each push writes a version beside it, swaps the link, has the
// server reload from its path and reset its prefix cache, and removes the
// older versions but never the checkpoint the link first pointed to. A
// weights dir that is not a link is refused before anything is written.
func TestPushVLLM(t *testing.T) {
	m, b := tinyModel(t)
	ctx := context.Background()
	dir := t.TempDir()
	orig, err := filepath.Abs(tinyAgent)
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "served")
	if err := os.Symlink(orig, link); err != nil {
		t.Fatal(err)
	}
	s, c := standin(t, VLLM, m, b, func(_ *serverstandin.Server, cfg *Config) { cfg.WeightsDir = link })
	s.ModelPath = link
	var want []serverstandin.Call
	for k, ckpt := range versions {
		v := fmt.Sprint(k + 1)
		if err := c.Push(ctx, v, saveCheckpoint(b, ckpt)); err != nil {
			t.Fatal(err)
		}
		want = append(want, serverstandin.Call{Path: "/collective_rpc", ModelPath: link + ".v" + v}, serverstandin.Call{Path: "/reset_prefix_cache"})
		if got := s.Calls(); !reflect.DeepEqual(got, want) {
			t.Fatalf("calls %+v, want %+v", got, want)
		}
		if target, err := os.Readlink(link); err != nil || target != "served.v"+v {
			t.Fatalf("link points to %q (%v), want served.v%s", target, err, v)
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 2 {
			t.Errorf("%s holds %v, want the link and one version", dir, entries)
		}
		got, err := c.Sample(ctx, tinyPrompts()[:2], tinyOptions, rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			t.Fatal(err)
		}
		if got[0].WeightVersion != v {
			t.Errorf("vLLM reports no version: want the pushed %q, got %q", v, got[0].WeightVersion)
		}
	}
	if _, err := os.Stat(filepath.Join(orig, "model.safetensors")); err != nil {
		t.Errorf("the original checkpoint was touched: %v", err)
	}
	_, c2 := standin(t, VLLM, m, b, func(_ *serverstandin.Server, cfg *Config) { cfg.WeightsDir = t.TempDir() })
	err = c2.Push(ctx, "1", saveCheckpoint(b, tinyAgent))
	if err == nil || !strings.Contains(err.Error(), "is not a symbolic link") {
		t.Fatalf("push into a plain directory: %v, want a refusal", err)
	}
}

// TestStaleResampled: responses the server reports as sampled with the
// weights before the last push are sampled again (same seed, so the same
// draws as fresh ones), counted in Resampled; more stale answers than
// max_stale_retries allows stop with an error, never returning them.
func TestStaleResampled(t *testing.T) {
	m, b := tinyModel(t)
	ctx := context.Background()
	prompts := tinyPrompts()
	s, c := standin(t, Hacrl, m, b, func(_ *serverstandin.Server, cfg *Config) { cfg.Concurrency = 1 })
	if err := c.Push(ctx, "1", saveCheckpoint(b, tinyAgent)); err != nil {
		t.Fatal(err)
	}
	want, err := Local{m}.Sample(ctx, prompts, tinyOptions, rand.New(rand.NewPCG(5, 6)))
	if err != nil {
		t.Fatal(err)
	}
	s.Stale = 3
	if err := c.Push(ctx, "2", saveCheckpoint(b, tinyAgent)); err != nil {
		t.Fatal(err)
	}
	got, err := c.Sample(ctx, prompts, tinyOptions, rand.New(rand.NewPCG(5, 6)))
	if err != nil {
		t.Fatal(err)
	}
	resampled := 0
	for i := range got {
		resampled += got[i].Resampled
		if got[i].WeightVersion != "2" || !reflect.DeepEqual(got[i].Sample, want[i].Sample) {
			t.Fatalf("row %d: version %q %+v, want version 2 and %+v", i, got[i].WeightVersion, got[i].Sample, want[i].Sample)
		}
	}
	if resampled != 3 || s.Requests() != len(prompts)+3 {
		t.Errorf("%d re-samples in %d requests, want 3 in %d", resampled, s.Requests(), len(prompts)+3)
	}
	s.Stale = 1000
	if err := c.Push(ctx, "3", saveCheckpoint(b, tinyAgent)); err != nil {
		t.Fatal(err)
	}
	_, err = c.Sample(ctx, prompts, tinyOptions, rand.New(rand.NewPCG(5, 6)))
	if err == nil || !strings.Contains(err.Error(), `sampled with stale weights after 2 re-samples (first: row 0, weight version "2", want "3"`) {
		t.Fatalf("error %v, want stale weights named", err)
	}
}

// TestServerFaults: error statuses, malformed answers, timeouts and
// dropped connections give errors naming the server, the row and the
// field; dropped connections are retried, nothing else is.
func TestServerFaults(t *testing.T) {
	m, b := tinyModel(t)
	ctx := context.Background()
	tests := []struct {
		name   string
		setup  func(*serverstandin.Server, *Config)
		want   string // "" = the request succeeds
		unique int    // requests the server should see for one prompt
	}{
		{"5xx", func(s *serverstandin.Server, _ *Config) {
			s.Answer = func(int) (int, string, bool) { return 503, `{"error": {"message": "engine overloaded"}}`, true }
		}, `rollout server http://127.0.0.1:`, 1},
		{"5xx body", func(s *serverstandin.Server, _ *Config) {
			s.Answer = func(int) (int, string, bool) { return 500, `{"error": {"message": "CUDA out of memory"}}`, true }
		}, `row 0: POST /v1/completions: HTTP 500: {"error": {"message": "CUDA out of memory"}}`, 1},
		{"NaN", func(s *serverstandin.Server, _ *Config) {
			s.Answer = func(int) (int, string, bool) {
				return 200, `{"choices": [{"token_ids": [5], "logprobs": {"token_logprobs": [NaN]}, "finish_reason": "length"}]}`, true
			}
		}, "row 0: not a completions response", 1},
		{"missing ids", func(s *serverstandin.Server, _ *Config) {
			s.Rewrite = func(_ int, a map[string]any) {
				ch := a["choices"].([]any)[0].(map[string]any)
				delete(ch, "token_ids")
				delete(ch["logprobs"].(map[string]any), "tokens")
			}
		}, "row 0: choices[0].token_ids: missing", 1},
		{"id outside vocabulary", func(s *serverstandin.Server, _ *Config) {
			s.Rewrite = func(_ int, a map[string]any) {
				ch := a["choices"].([]any)[0].(map[string]any)
				ch["token_ids"].([]any)[0] = 4000
				ch["logprobs"].(map[string]any)["tokens"].([]any)[0] = "token_id:4000"
			}
		}, "row 0: tokens[0]: token id 4000 outside the vocabulary [0, 100)", 1},
		{"timeout", func(s *serverstandin.Server, cfg *Config) { s.Delay, cfg.Timeout = 2*time.Second, 100*time.Millisecond },
			"no answer within 100ms (rollout.timeout)", 1},
		{"dropped then answered", func(s *serverstandin.Server, _ *Config) { s.Drop = 2 }, "", 3},
		{"dropped too often", func(s *serverstandin.Server, cfg *Config) { s.Drop, cfg.Retries = 5, 1 }, "(after 1 retries)", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, c := standin(t, Hacrl, m, b, tc.setup)
			got, err := c.Sample(ctx, [][]int{{1, 10, 20}}, tinyOptions, rand.New(rand.NewPCG(1, 1)))
			if tc.want == "" {
				if err != nil || len(got) != 1 {
					t.Fatalf("%v, %d samples", err, len(got))
				}
			} else if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "agent gpt-char") {
				t.Fatalf("error %v, want one naming the agent and containing %q", err, tc.want)
			}
			if n := s.Requests(); n != tc.unique {
				t.Errorf("%d requests, want %d (retries only for connection errors)", n, tc.unique)
			}
		})
	}
}
