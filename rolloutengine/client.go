package rolloutengine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hacrl/hacrl/model"
)

// Config is a Client's server and limits.
type Config struct {
	// Agent names the agent in errors.
	Agent string
	// URL is the server's base address, e.g. http://127.0.0.1:8000.
	URL string
	// Dialect is VLLM, SGLang or Hacrl.
	Dialect string
	// Model is the model name sent with completions requests.
	Model string
	// APIKey, when set, is sent as a bearer token.
	APIKey string
	// WeightsDir is where Push writes weights (see config.Rollout.WeightsDir).
	WeightsDir string
	// Timeout bounds each request; 0 means 10 minutes.
	Timeout time.Duration
	// Concurrency is the most requests in flight; 0 means 16.
	Concurrency int
	// Retries is how many times a request that could not reach the server
	// is sent again.
	Retries int
	// MaxStaleRetries is how many times stale responses are sampled again.
	MaxStaleRetries int
	// MaxSeq and Vocab are the agent's model's context and vocabulary: a
	// request asks for at most MaxSeq − len(prompt) tokens, as in-process
	// sampling does, and every returned id must be below Vocab (or below
	// SampleOptions.Vocab when set).
	MaxSeq, Vocab int
	// HTTP is the client to use; nil means a new one.
	HTTP *http.Client
}

// Client samples through an OpenAI-compatible server and pushes weights to
// it. It is safe for concurrent use.
type Client struct {
	cfg  Config
	http *http.Client

	mu      sync.Mutex
	version string // the version pushed last ("" before the first Push)
}

// New returns a client for cfg's server. It makes no request.
func New(cfg Config) (*Client, error) {
	switch cfg.Dialect {
	case VLLM, SGLang, Hacrl:
	default:
		return nil, fmt.Errorf("rollout engine: dialect %q, want %s, %s or %s", cfg.Dialect, VLLM, SGLang, Hacrl)
	}
	if cfg.URL == "" {
		return nil, errors.New("rollout engine: no server URL")
	}
	if cfg.MaxSeq <= 0 || cfg.Vocab <= 0 {
		return nil, fmt.Errorf("rollout engine: model context %d and vocabulary %d, want > 0", cfg.MaxSeq, cfg.Vocab)
	}
	cfg.URL = strings.TrimRight(cfg.URL, "/")
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Minute
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 16
	}
	h := cfg.HTTP
	if h == nil { // keep a connection per request in flight, not the default two
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = cfg.Concurrency
		h = &http.Client{Transport: t}
	}
	return &Client{cfg: cfg, http: h}, nil
}

// Version is the weight version pushed last ("" before any Push).
func (c *Client) Version() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

func (c *Client) setVersion(v string) {
	c.mu.Lock()
	c.version = v
	c.mu.Unlock()
}

// Sample implements Engine: one request per prompt, at most Concurrency at
// once. Responses the server reports as sampled with a weight version
// other than the one pushed last are sampled again with the same seed, at
// most MaxStaleRetries times; after that Sample fails. Before the first
// Push every version the server reports is taken as current.
func (c *Client) Sample(ctx context.Context, prompts [][]int, opt model.SampleOptions, rng *rand.Rand) ([]Sample, error) {
	greedy := opt.Greedy || opt.Temperature == 0
	if rng == nil && !greedy {
		return nil, fmt.Errorf("rollout engine: Sample: rng is nil")
	}
	if opt.MaxNewTokens <= 0 {
		return nil, fmt.Errorf("rollout engine: Sample: MaxNewTokens %d, want > 0", opt.MaxNewTokens)
	}
	rows := make([]row, len(prompts))
	var seeds []uint64
	if !greedy {
		seeds = model.RowSeeds(rng, len(prompts))
	}
	for i, p := range prompts {
		rows[i] = row{prompt: p, maxTokens: min(opt.MaxNewTokens, c.cfg.MaxSeq-len(p))}
		if rows[i].maxTokens <= 0 {
			return nil, fmt.Errorf("rollout engine: prompt %d has %d tokens: no room in the model's context of %d", i, len(p), c.cfg.MaxSeq)
		}
		if seeds != nil {
			rows[i].seed, rows[i].seeded = seeds[i], true
		}
	}
	want := c.Version()
	out := make([]Sample, len(prompts))
	pending := make([]int, len(prompts))
	for i := range pending {
		pending[i] = i
	}
	for attempt := 0; ; attempt++ {
		if err := c.sampleRows(ctx, rows, pending, opt, want, out); err != nil {
			return nil, err
		}
		var stale []int
		for _, i := range pending {
			if want != "" && out[i].WeightVersion != want { // before any push every version is current
				stale = append(stale, i)
			}
		}
		if len(stale) == 0 {
			return out, nil
		}
		if attempt == c.cfg.MaxStaleRetries {
			i := stale[0]
			return nil, fmt.Errorf("%s: %d responses sampled with stale weights after %d re-samples (first: row %d, weight version %q, want %q as pushed last); not used as on-policy",
				c.where(), len(stale), attempt, i, out[i].WeightVersion, want)
		}
		for _, i := range stale {
			out[i].Resampled++
		}
		pending = stale
	}
}

// where names the server and agent in errors.
func (c *Client) where() string {
	return fmt.Sprintf("rollout server %s (%s, agent %s)", c.cfg.URL, c.cfg.Dialect, c.cfg.Agent)
}

// sampleRows samples rows idx concurrently into out; the first error stops
// the others. want is the version a response without one is given.
func (c *Client) sampleRows(ctx context.Context, rows []row, idx []int, opt model.SampleOptions, want string, out []Sample) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sem := make(chan struct{}, c.cfg.Concurrency)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for _, i := range idx {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			s, err := c.sampleOne(ctx, rows[i], opt)
			if err != nil {
				once.Do(func() { first = fmt.Errorf("%s: row %d: %w", c.where(), i, err); cancel(first) })
				return
			}
			if s.WeightVersion == "" {
				s.WeightVersion = want
			}
			s.Resampled = out[i].Resampled
			out[i] = s
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return context.Cause(ctx)
}

// sampleOne sends one row's request and checks the answer.
func (c *Client) sampleOne(ctx context.Context, r row, opt model.SampleOptions) (Sample, error) {
	var a answer
	var err error
	switch c.cfg.Dialect {
	case SGLang:
		var data []byte
		if data, err = c.post(ctx, "/generate", generateBody(r, opt)); err == nil {
			a, err = parseGenerate(data)
		}
	default:
		var data []byte
		if data, err = c.post(ctx, "/v1/completions", completionBody(c.cfg.Dialect, c.cfg.Model, r, opt)); err == nil {
			a, err = parseCompletion(data)
		}
	}
	if err != nil {
		return Sample{}, err
	}
	if err := c.check(a, r, opt); err != nil {
		return Sample{}, err
	}
	lps := make([]float32, len(a.logProbs))
	for i, lp := range a.logProbs {
		lps[i] = float32(lp)
	}
	return Sample{Sample: model.Sample{Tokens: a.tokens, LogProbs: lps, Stopped: a.stopped}, WeightVersion: a.version}, nil
}

// maxLogProb is the largest log-prob accepted: 0 and float rounding.
const maxLogProb = 1e-3

// check holds an answer to what the request allows: ids in the
// vocabulary, finite log-probs, at most maxTokens tokens, a stop token
// exactly at the end of a stopped response and nowhere else, and a
// response cut by length exactly at maxTokens.
func (c *Client) check(a answer, r row, opt model.SampleOptions) error {
	vocab := c.cfg.Vocab
	if opt.Vocab > 0 {
		vocab = min(vocab, opt.Vocab)
	}
	n := len(a.tokens)
	if n == 0 {
		return badField("tokens", "none came back")
	}
	if n > r.maxTokens {
		return badField("tokens", "%d tokens, more than max_tokens %d", n, r.maxTokens)
	}
	for i, id := range a.tokens {
		if id < 0 || id >= vocab {
			return badField(fmt.Sprintf("tokens[%d]", i), "token id %d outside the vocabulary [0, %d)", id, vocab)
		}
		if i < n-1 && slices.Contains(opt.Stop, id) {
			return badField(fmt.Sprintf("tokens[%d]", i), "stop token %d before the end of the response", id)
		}
	}
	for i, lp := range a.logProbs {
		if math.IsNaN(lp) || math.IsInf(lp, 0) || lp > maxLogProb {
			return badField(fmt.Sprintf("logprobs[%d]", i), "%g, want a finite log-prob <= 0", lp)
		}
	}
	last := a.tokens[n-1]
	switch {
	case a.stopped && !slices.Contains(opt.Stop, last):
		return badField("finish_reason", "stop, but the last token %d is none of the agent's stop tokens %v (a server-side stop the trainer does not know)", last, opt.Stop)
	case !a.stopped && slices.Contains(opt.Stop, last):
		return badField("finish_reason", "length, but the response ends with stop token %d", last)
	case !a.stopped && n != r.maxTokens:
		return badField("finish_reason", "length after %d tokens, want %d (max_tokens; is the server's context shorter than the model's %d?)", n, r.maxTokens, c.cfg.MaxSeq)
	}
	return nil
}

// maxBody bounds an answer's size.
const maxBody = 64 << 20

// statusError is an answer with an error status.
type statusError struct {
	status int
	body   string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("HTTP %d: %s", e.status, e.body)
}

// post sends body as JSON to path and returns the answer's body. A request
// that does not reach the server is sent again, at most Retries times,
// after a growing pause; an answer with an error status or a timeout is an
// error at once.
func (c *Client) post(ctx context.Context, path string, body any) ([]byte, error) {
	payload, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	pause := 100 * time.Millisecond
	for attempt := 0; ; attempt++ {
		data, retry, err := c.postOnce(ctx, path, payload)
		if err == nil || !retry || attempt >= c.cfg.Retries {
			if err != nil && retry {
				err = fmt.Errorf("%w (after %d retries)", err, attempt)
			}
			return data, err
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// postOnce makes one request; retry reports a failure to reach the server.
func (c *Client) postOnce(ctx context.Context, path string, payload []byte) (data []byte, retry bool, err error) {
	rctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, c.cfg.URL+path, bytes.NewReader(payload))
	if err != nil {
		return nil, false, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return nil, false, context.Cause(ctx)
		case rctx.Err() != nil:
			return nil, false, fmt.Errorf("POST %s: no answer within %s (rollout.timeout)", path, c.cfg.Timeout)
		}
		return nil, true, fmt.Errorf("POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	data, err = io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		if rctx.Err() != nil && ctx.Err() == nil {
			return nil, false, fmt.Errorf("POST %s: no whole answer within %s (rollout.timeout)", path, c.cfg.Timeout)
		}
		return nil, false, fmt.Errorf("POST %s: reading the answer: %w", path, err)
	}
	if len(data) > maxBody {
		return nil, false, fmt.Errorf("POST %s: answer larger than %d bytes", path, maxBody)
	}
	if resp.StatusCode/100 != 2 {
		body := strings.TrimSpace(string(data))
		if len(body) > 500 {
			body = body[:500] + "…"
		}
		return nil, false, fmt.Errorf("POST %s: %w", path, &statusError{resp.StatusCode, body})
	}
	return data, false, nil
}
