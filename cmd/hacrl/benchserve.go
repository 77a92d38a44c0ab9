package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/serve"
	"github.com/hacrl/hacrl/tokenizer"
	"github.com/hacrl/hacrl/train"
	"github.com/spf13/cobra"
)

// benchServeLong is bench serve's help: what it measures and every field
// of its output lines.
const benchServeLong = `Measure hacrl serve under load: the server runs in this process on a
loopback port (or, with --url, an OpenAI-compatible server elsewhere is
measured), and for each count of --clients (1,8,32) that many clients send
POST /v1/completions requests back to back over HTTP, each
--requests-per-client requests (or for --duration). Every request has a
fresh random prompt of --prompt-tokens token ids, max_tokens --max-tokens,
temperature 1, its own seed and ignore_eos, so that it generates exactly
--max-tokens tokens (a response with another count is an error); with
--stream it streams (server-sent events, stream_options.include_usage) and
the time to its first token is measured too.

The model is CHECKPOINT (an agent directory, as hacrl serve takes) or, with
--config, a random-weight model of a Hugging Face config.json
(bench/configs has Qwen3-0.6B; --layers overrides only its depth) served
with a char-level tokenizer of printable ASCII: prompts are token ids
anyway, and sampling covers the model's whole vocabulary. The server
decodes at most --max-batch sequences at once (default: the largest
--clients count, so that all clients batch together) with a context of
--max-context tokens (default --prompt-tokens + --max-tokens, which
bounds the key/value cache), and admits max(4 × --max-batch, the largest
--clients count) requests at once. --warmup requests are sent first and not
counted.

Prints one JSON line per client count, as soon as it is measured:
  clients, requests        concurrent clients; requests completed
  prompt_tokens, max_tokens, stream
  seconds                  wall time from the first request sent to the
                           last response read
  generated_tokens         requests × max_tokens
  tokens_per_s             generated_tokens / seconds, all clients together
  requests_per_s
  latency_ms_p50, _p99     request latency (sent to last byte read),
                           nearest-rank percentiles
  ttft_ms_p50, _p99        with --stream: time to the first chunk that
                           carries a token
  speedup                  tokens_per_s over that of the first --clients
                           count (speedup_base_clients; 1 when it is 1)
  steps, shared_steps      the in-process server's decoding steps in this
                           count's window, and those that decoded tokens of
                           two or more requests together (serve Stats)
  shared_step_fraction     shared_steps / steps
  tokens_per_step          generated_tokens / steps: the mean batch
  server, model, params, layers, max_batch, max_context, threads
  peak_rss_mb              this process's peak resident memory so far (the
                           server's, when in-process)
With --url the server's own fields (steps…, params, layers, max_batch,
max_context) are absent, and prompt ids are drawn below --prompt-vocab.`

func benchServeCmd() *cobra.Command {
	var (
		cfgPath, clientsList, url, modelName, backendCfg string
		layers, rpc, maxTokens, promptTokens, maxBatch   int
		maxContext, warmup, threads, promptVocab         int
		duration                                         time.Duration
		stream                                           bool
		seed                                             int64
	)
	cmd := &cobra.Command{
		Use:   "serve CHECKPOINT | --config HF_CONFIG.json | --url URL",
		Short: "Measure hacrl serve's tokens/s and latency for 1, 8, 32… concurrent clients",
		Long:  benchServeLong,
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			clients, err := parseClients(clientsList)
			if err != nil {
				return err
			}
			sources := len(args)
			if cfgPath != "" {
				sources++
			}
			if url != "" {
				sources++
			}
			switch {
			case sources != 1:
				return usage("give one of CHECKPOINT, --config or --url")
			case maxTokens < 1:
				return usage("--max-tokens %d: want ≥ 1", maxTokens)
			case promptTokens < 1:
				return usage("--prompt-tokens %d: want ≥ 1", promptTokens)
			case cmd.Flags().Changed("duration") && cmd.Flags().Changed("requests-per-client"):
				return usage("give --requests-per-client or --duration, not both")
			case duration < 0 || duration == 0 && cmd.Flags().Changed("duration"):
				return usage("--duration %v: want > 0", duration)
			case rpc < 1:
				return usage("--requests-per-client %d: want ≥ 1", rpc)
			case maxBatch < 0, maxContext < 0, warmup < 0, promptVocab < 0:
				return usage("--max-batch, --max-context, --warmup and --prompt-vocab must be ≥ 0")
			case cmd.Flags().Changed("layers") && layers < 1:
				return usage("--layers %d: want ≥ 1", layers)
			case cmd.Flags().Changed("layers") && cfgPath == "":
				return usage("--layers applies to --config only")
			}
			if threads > 0 {
				runtime.GOMAXPROCS(threads)
			}
			o := loadOpts{promptTokens: promptTokens, maxTokens: maxTokens, rpc: rpc, duration: duration, stream: stream, seed: seed}
			info := map[string]any{}
			var t *loadTarget
			if url != "" {
				if t, err = externalTarget(cmd.Context(), url, modelName); err != nil {
					return err
				}
				t.vocab = orDefault(promptVocab, 1000)
				info["server"] = t.url
			} else {
				m, tok, tmpl, smp, err := benchServeModel(cmd, args, cfgPath, layers, backendCfg, seed)
				if err != nil {
					return err
				}
				mc := m.Config()
				if maxContext == 0 {
					maxContext = promptTokens + maxTokens
				}
				if promptTokens+maxTokens > min(maxContext, mc.MaxSeq) {
					return usage("--prompt-tokens %d + --max-tokens %d: more than the context of %d tokens (--max-context %d, the model's %d positions)",
						promptTokens, maxTokens, min(maxContext, mc.MaxSeq), maxContext, mc.MaxSeq)
				}
				if maxBatch == 0 {
					maxBatch = slices.Max(clients)
				}
				srv, err := serve.New(serve.Config{Model: m, Tok: tok, Template: tmpl, Sampling: smp, Name: orDefault(modelName, "bench"),
					MaxBatch: maxBatch, MaxContext: maxContext, MaxConcurrent: max(4*maxBatch, slices.Max(clients)),
					Logf: func(f string, a ...any) { fmt.Fprintf(cmd.ErrOrStderr(), f+"\n", a...) }})
				if err != nil {
					return err
				}
				stop, addr, err := serveLoopback(cmd.Context(), srv)
				if err != nil {
					return err
				}
				defer stop()
				t = &loadTarget{url: "http://" + addr, model: srv.Config().Name, stats: srv.Stats, vocab: orDefault(promptVocab, srv.Config().Sampling.Vocab)}
				c := srv.Config()
				info["server"] = "hacrl-serve"
				info["params"], info["layers"], info["max_batch"], info["max_context"] = m.NumParams(), mc.Layers, c.MaxBatch, c.MaxContext
			}
			info["model"] = t.model
			info["threads"] = runtime.GOMAXPROCS(0)
			t.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: slices.Max(clients) + 1, DisableCompression: true}}
			defer t.client.CloseIdleConnections()
			if warmup > 0 {
				w := o
				w.rpc, w.duration = warmup, 0
				if _, err := t.run(cmd.Context(), 1, w); err != nil {
					return fmt.Errorf("warmup: %w", err)
				}
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			var base float64
			for i, c := range clients {
				res, err := t.run(cmd.Context(), c, o)
				if err != nil {
					return fmt.Errorf("%d clients: %w", c, err)
				}
				if i == 0 {
					base = res["tokens_per_s"].(float64)
				}
				res["speedup"] = round(res["tokens_per_s"].(float64)/base, 2)
				res["speedup_base_clients"] = clients[0]
				for k, v := range info {
					res[k] = v
				}
				res["peak_rss_mb"] = math.Round(peakRSSMB())
				if err := enc.Encode(res); err != nil {
					return err
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfgPath, "config", "", "serve a random-weight model of this Hugging Face config.json instead of a checkpoint")
	f.IntVar(&layers, "layers", 0, "with --config: override the config's depth")
	f.StringVar(&clientsList, "clients", "1,8,32", "comma-separated counts of concurrent clients, measured in turn")
	f.IntVar(&rpc, "requests-per-client", 4, "requests each client sends")
	f.DurationVar(&duration, "duration", 0, "instead of --requests-per-client: clients send requests until this much time has passed (each finishes its last)")
	f.IntVar(&maxTokens, "max-tokens", 64, "max_tokens of every request (each generates exactly this many: ignore_eos)")
	f.IntVar(&promptTokens, "prompt-tokens", 16, "token ids in each request's random prompt")
	f.IntVar(&promptVocab, "prompt-vocab", 0, "prompt ids are drawn below this (0: the served tokenizer's vocabulary; with --url 1000)")
	f.BoolVar(&stream, "stream", false, "stream the responses and measure the time to the first token")
	f.IntVar(&maxBatch, "max-batch", 0, "the server's most sequences decoded at once (0: the largest --clients count)")
	f.IntVar(&maxContext, "max-context", 0, "the server's most tokens of one sequence (0: --prompt-tokens + --max-tokens)")
	f.IntVar(&warmup, "warmup", 1, "untimed requests sent first, one at a time")
	f.StringVar(&url, "url", "", "measure the OpenAI-compatible server at this base URL (http://host:port) instead")
	f.StringVar(&modelName, "model", "", "with --url: the model requests name (default: the first of GET /v1/models)")
	f.IntVar(&threads, "threads", 0, "GOMAXPROCS (0: the Go default, all cores)")
	f.Int64Var(&seed, "seed", 0, "seed of the prompts, the request seeds and a --config model's weights")
	f.StringVar(&backendCfg, "backend", "", "GoMLX backend config")
	return cmd
}

// orDefault is v, or def when v is the zero value.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// parseClients reads --clients: positive counts, comma-separated.
func parseClients(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, usage("--clients %q: want positive counts separated by commas (1,8,32)", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// benchServeModel is the model bench serve serves: checkpoint args[0]
// (with its tokenizer, template and sampling), or a random-weight model of
// cfgPath with a char-level tokenizer, sampling over its whole vocabulary.
func benchServeModel(cmd *cobra.Command, args []string, cfgPath string, layers int, backendCfg string, seed int64) (*model.Model, tokenizer.Tokenizer, tokenizer.Template, model.SampleOptions, error) {
	var tmpl tokenizer.Template
	var smp model.SampleOptions
	b, err := backend.New(backend.Choose(backendCfg))
	if err != nil {
		return nil, nil, tmpl, smp, err
	}
	if len(args) == 1 {
		s, err := train.LoadSaved(args[0], train.TemplateChoice{})
		if err != nil {
			return nil, nil, tmpl, smp, err
		}
		a, err := s.Agent(b)
		if err != nil {
			return nil, nil, tmpl, smp, err
		}
		return a.Model, a.Tok, a.Template, a.Sampling, nil
	}
	cfg, err := model.ReadConfig(cfgPath)
	if err != nil {
		return nil, nil, tmpl, smp, err
	}
	if cmd.Flags().Changed("layers") {
		cfg.Layers = layers
	}
	m, err := model.New(b, cfg, seed)
	if err != nil {
		return nil, nil, tmpl, smp, fmt.Errorf("%s: %w", cfgPath, err)
	}
	var ascii strings.Builder
	for c := ' '; c <= '~'; c++ {
		ascii.WriteRune(c)
	}
	tok, err := tokenizer.NewChar(ascii.String(), nil)
	if err != nil {
		return nil, nil, tmpl, smp, err
	}
	return m, tok, tokenizer.Template{Kind: tokenizer.KindPlain}, model.SampleOptions{Vocab: cfg.Vocab}, nil
}

// serveLoopback serves srv on a free loopback port until stop.
func serveLoopback(ctx context.Context, srv *serve.Server) (stop func(), addr string, err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		return nil, "", err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ctx, l) //nolint:errcheck // ends with stop
	}()
	return func() {
		cancel()
		<-done
		srv.Close()
	}, l.Addr().String(), nil
}

// loadTarget is the server under load.
type loadTarget struct {
	url    string // base URL, no trailing slash
	model  string
	vocab  int                // prompt ids are drawn below this
	stats  func() serve.Stats // nil for an external server
	client *http.Client
	seq    atomic.Uint64 // requests sent so far: each request's seed
}

// externalTarget is the server at url, naming model or the first of its
// GET /v1/models.
func externalTarget(ctx context.Context, url, model string) (*loadTarget, error) {
	url = strings.TrimSuffix(url, "/")
	t := &loadTarget{url: url, model: model}
	if model != "" {
		return t, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/models", nil)
	if err != nil {
		return nil, usage("--url %q: %v", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("--url: %w", err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || resp.StatusCode != http.StatusOK || len(list.Data) == 0 {
		return nil, fmt.Errorf("GET %s/v1/models: status %s, no model listed (%v); name one with --model", url, resp.Status, err)
	}
	t.model = list.Data[0].ID
	return t, nil
}

// loadOpts is one measurement's load.
type loadOpts struct {
	promptTokens, maxTokens, rpc int
	duration                     time.Duration // > 0: send until then instead of rpc requests
	stream                       bool
	seed                         int64
}

// sample is one request's timings.
type sample struct{ latency, ttft time.Duration }

// run measures n clients sending requests back to back and returns the
// figures of one output line. The first failed request stops every client.
func (t *loadTarget) run(ctx context.Context, n int, o loadOpts) (map[string]any, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var before serve.Stats
	if t.stats != nil {
		before = t.stats()
	}
	samples := make([][]sample, n)
	var wg sync.WaitGroup
	t0 := time.Now()
	for c := range n {
		wg.Go(func() {
			for j := 0; o.duration > 0 && time.Since(t0) < o.duration || o.duration == 0 && j < o.rpc; j++ {
				s, err := t.request(ctx, o)
				if err != nil {
					cancel(err)
					return
				}
				samples[c] = append(samples[c], s)
			}
		})
	}
	wg.Wait()
	secs := time.Since(t0).Seconds()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	var lat, ttft []float64
	for _, ss := range samples {
		for _, s := range ss {
			lat = append(lat, float64(s.latency.Microseconds())/1000)
			ttft = append(ttft, float64(s.ttft.Microseconds())/1000)
		}
	}
	tokens := len(lat) * o.maxTokens
	res := map[string]any{"clients": n, "requests": len(lat), "prompt_tokens": o.promptTokens, "max_tokens": o.maxTokens,
		"stream": o.stream, "seconds": round(secs, 6), "generated_tokens": tokens,
		"tokens_per_s": round(float64(tokens)/secs, 1), "requests_per_s": round(float64(len(lat))/secs, 2),
		"latency_ms_p50": round(percentile(lat, 50), 2), "latency_ms_p99": round(percentile(lat, 99), 2)}
	if o.stream {
		res["ttft_ms_p50"], res["ttft_ms_p99"] = round(percentile(ttft, 50), 2), round(percentile(ttft, 99), 2)
	}
	if t.stats != nil {
		after := t.stats()
		steps, shared := after.Steps-before.Steps, after.SharedSteps-before.SharedSteps
		res["steps"], res["shared_steps"] = steps, shared
		res["shared_step_fraction"] = round(float64(shared)/float64(max(steps, 1)), 4)
		res["tokens_per_step"] = round(float64(tokens)/float64(max(steps, 1)), 2)
	}
	return res, nil
}

// percentile is the nearest-rank p-th percentile of x (0 for none).
func percentile(x []float64, p float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := slices.Clone(x)
	slices.Sort(s)
	k := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(k, 1), len(s))-1]
}

// request sends one completion request with a fresh prompt and seed and
// reads its whole response.
func (t *loadTarget) request(ctx context.Context, o loadOpts) (sample, error) {
	id := t.seq.Add(1)
	rng := rand.New(rand.NewPCG(uint64(o.seed), id))
	prompt := make([]int, o.promptTokens)
	for i := range prompt {
		prompt[i] = rng.IntN(t.vocab)
	}
	body := map[string]any{"model": t.model, "prompt": prompt, "max_tokens": o.maxTokens, "temperature": 1,
		"seed": o.seed<<20 + int64(id), "ignore_eos": true, "stream": o.stream}
	if o.stream {
		body["stream_options"] = map[string]any{"include_usage": true}
	}
	buf, err := json.Marshal(body)
	if err != nil {
		return sample{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url+"/v1/completions", bytes.NewReader(buf))
	if err != nil {
		return sample{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	t0 := time.Now()
	resp, err := t.client.Do(req)
	if err != nil {
		return sample{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1000))
		return sample{}, fmt.Errorf("POST %s/v1/completions: %s: %s", t.url, resp.Status, bytes.TrimSpace(msg))
	}
	var s sample
	var got *struct {
		CompletionTokens int `json:"completion_tokens"`
	}
	if !o.stream {
		var r struct {
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			return sample{}, fmt.Errorf("POST %s/v1/completions: reading the response: %w", t.url, err)
		}
		got = r.Usage
	} else {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data:")
			if data = strings.TrimSpace(data); !ok || data == "[DONE]" {
				continue
			}
			var ev struct {
				Choices []json.RawMessage `json:"choices"`
				Error   json.RawMessage   `json:"error"`
				Usage   *struct {
					CompletionTokens int `json:"completion_tokens"`
				} `json:"usage"`
			}
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				return sample{}, fmt.Errorf("POST %s/v1/completions: a streamed event is not JSON: %w", t.url, err)
			}
			if len(ev.Error) > 0 && string(ev.Error) != "null" {
				return sample{}, fmt.Errorf("POST %s/v1/completions: streamed error %s", t.url, ev.Error)
			}
			if len(ev.Choices) > 0 && s.ttft == 0 {
				s.ttft = time.Since(t0)
			}
			if ev.Usage != nil {
				got = ev.Usage
			}
		}
		if err := sc.Err(); err != nil {
			return sample{}, fmt.Errorf("POST %s/v1/completions: reading the stream: %w", t.url, err)
		}
	}
	s.latency = time.Since(t0)
	switch {
	case got == nil:
		return sample{}, fmt.Errorf("POST %s/v1/completions: the response has no usage", t.url)
	case got.CompletionTokens != o.maxTokens:
		return sample{}, fmt.Errorf("POST %s/v1/completions: %d tokens generated, want max_tokens %d (does the server honour ignore_eos?)", t.url, got.CompletionTokens, o.maxTokens)
	case o.stream && s.ttft == 0:
		return sample{}, errors.New("the stream carried no token")
	}
	return s, nil
}
