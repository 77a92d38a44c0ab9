// Package reward talks to an external reward: a program or an HTTP endpoint
// the user writes, which scores responses in place of a task's own checker.
//
// The protocol (docs/reward.md) is one JSON request per batch of responses
// and one JSON answer:
//
//	request  {"version": 1, "purpose": "train", "step": 3, "items": [
//	           {"id": 0, "problem_id": "arith/train/12", "agent": "gpt-char",
//	            "prompt": "47+38", "response": "…\n#### 85", "reference": "85",
//	            "tokens": 31, "truncated": false}, …]}
//	answer   {"rewards": [{"id": 0, "reward": 1, "correct": true}, …]}
//
// A command (Options.Command) is started once, reads one request per line on
// its stdin and writes one answer per line on its stdout; its stderr is
// passed to Options.Log line by line. An endpoint (Options.URL) gets each
// request as the body of a POST and answers in the response body.
//
// Every answer is checked: every id of the request answered exactly once, in
// any order, no other id, each reward a finite number in the reward's range
// (Options.Range, [0, 1] unless told otherwise). Anything
// else — a malformed answer, a crash, a hang past the timeout, an HTTP error
// — is an error naming the reward and what was wrong; nothing is retried,
// so no response is ever scored twice. Start sends an empty request first,
// so a reward that cannot start or does not speak the protocol fails before
// any training.
package reward

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"time"
)

// Version is the protocol version every request carries.
const Version = 1

// Purposes of a request.
const (
	PurposeStart = "start" // the empty request Start sends
	PurposeTrain = "train" // a training step's responses
	PurposeEval  = "eval"  // responses of a held-out evaluation
)

// Item is one response to score, as the request carries it.
type Item struct {
	ID        int     `json:"id"`         // unique within the request; set by Score
	ProblemID string  `json:"problem_id"` // e.g. "arith/train/12"
	Agent     string  `json:"agent"`      // the agent that wrote the response
	Prompt    string  `json:"prompt"`     // the question, before any prompt template
	Response  string  `json:"response"`   // the response text, without the stop token
	Reference *string `json:"reference"`  // the reference answer; null when the problem has none
	Tokens    int     `json:"tokens"`     // the response's length in the agent's tokens (stop token included)
	Truncated bool    `json:"truncated"`  // the response hit the token limit instead of stopping
}

// Request is one batch.
type Request struct {
	Version int    `json:"version"`
	Purpose string `json:"purpose"` // start, train or eval
	Step    int    `json:"step"`    // the training step (1-based); for eval, the steps done before it
	Items   []Item `json:"items"`
}

// Result is the reward's judgement of one item.
type Result struct {
	Reward  float64
	Correct bool // the answer's "correct", or Reward >= the range's max when it gives none
}

// Options configures a Client. Give exactly one of Command and URL.
type Options struct {
	Command  []string      // argv of a long-lived process speaking JSON lines
	URL      string        // an HTTP endpoint taking POSTed JSON
	TokenEnv string        // URL only: environment variable with a bearer token
	Timeout  time.Duration // per request; must be > 0
	// StartTimeout bounds the start and the first (empty) request, which
	// may include loading a model; 0 means Timeout.
	StartTimeout time.Duration
	BatchSize    int // most items per request; 0 = all items of a Score call
	// Range is [min, max], the rewards an answer may give; the zero value
	// means [0, 1].
	Range [2]float64
	// Log receives each line the command writes on its stderr (nil: hacrl's
	// stderr, prefixed "reward: ").
	Log func(line string)
}

// Client is a started (or startable) external reward. It is not safe for
// concurrent use: requests go one at a time.
type Client struct {
	name  string // "reward command [python3 r.py]" or "reward url http://…"
	opts  Options
	t     transport
	calls int
}

// transport carries one request and brings back its raw answer.
type transport interface {
	start(ctx context.Context) error
	// roundTrip sends one request, within timeout, and returns the raw answer.
	roundTrip(ctx context.Context, body []byte, timeout limit) ([]byte, error)
	// fail makes the transport unusable (a command is killed): every later
	// roundTrip returns err.
	fail(err error) error
	close() error
}

// limit is a request's timeout and the config key that sets it.
type limit struct {
	d   time.Duration
	key string
}

func (l limit) String() string { return fmt.Sprintf("%v (%s)", l.d, l.key) }

// New checks opts and prepares a client; nothing starts before Start.
func New(opts Options) (*Client, error) {
	c := &Client{opts: opts}
	switch {
	case len(opts.Command) > 0 && opts.URL != "":
		return nil, errors.New("reward: give a command or a url, not both")
	case len(opts.Command) > 0:
		c.name = fmt.Sprintf("reward command %v", opts.Command)
	case opts.URL != "":
		c.name = "reward url " + opts.URL
	default:
		return nil, errors.New("reward: give a command or a url")
	}
	if opts.Timeout <= 0 {
		return nil, fmt.Errorf("%s: timeout must be > 0, got %v", c.name, opts.Timeout)
	}
	if opts.StartTimeout < 0 {
		return nil, fmt.Errorf("%s: start timeout must be >= 0, got %v", c.name, opts.StartTimeout)
	}
	if opts.StartTimeout == 0 {
		c.opts.StartTimeout = opts.Timeout
	}
	if opts.BatchSize < 0 {
		return nil, fmt.Errorf("%s: batch size must be >= 0, got %d", c.name, opts.BatchSize)
	}
	if opts.Range == [2]float64{} {
		c.opts.Range = [2]float64{0, 1}
	}
	if lo, hi := c.opts.Range[0], c.opts.Range[1]; !(lo < hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return nil, fmt.Errorf("%s: the reward range must be finite with min < max, got [%v, %v]", c.name, lo, hi)
	}
	if opts.Log == nil {
		c.opts.Log = func(line string) { fmt.Fprintln(os.Stderr, "reward: "+line) }
	}
	if len(opts.Command) > 0 {
		if opts.TokenEnv != "" {
			return nil, fmt.Errorf("%s: a token environment variable is for a url only", c.name)
		}
		c.t = newProcess(c.opts)
		return c, nil
	}
	token := ""
	if opts.TokenEnv != "" {
		token = os.Getenv(opts.TokenEnv)
		if token == "" {
			return nil, fmt.Errorf("%s: the environment variable %s (reward.token_env) is not set or empty", c.name, opts.TokenEnv)
		}
	}
	c.t = newHTTP(c.opts, token)
	return c, nil
}

// String names the reward: its command or its url.
func (c *Client) String() string { return c.name }

// Calls is the number of requests Score has sent so far.
func (c *Client) Calls() int { return c.calls }

// Start launches the command (or checks nothing for a url) and sends the
// empty request, which must be answered with an empty list of rewards.
func (c *Client) Start(ctx context.Context) error {
	if err := c.t.start(ctx); err != nil {
		return fmt.Errorf("%s: %w", c.name, err)
	}
	if _, err := c.send(ctx, Request{Version: Version, Purpose: PurposeStart, Items: []Item{}}, limit{c.opts.StartTimeout, "reward.start_timeout"}); err != nil {
		return fmt.Errorf("%s: the first (empty) request: %w", c.name, err)
	}
	return nil
}

// Score scores items, in requests of at most BatchSize items, and returns
// their results in the order of items. It sets each item's ID to its index.
func (c *Client) Score(ctx context.Context, purpose string, step int, items []Item) ([]Result, error) {
	out := make([]Result, 0, len(items))
	bs := c.opts.BatchSize
	if bs == 0 {
		bs = len(items)
	}
	for lo := 0; lo < len(items); lo += bs {
		hi := min(lo+bs, len(items))
		batch := make([]Item, hi-lo)
		copy(batch, items[lo:hi])
		for i := range batch {
			batch[i].ID = lo + i
		}
		c.calls++
		res, err := c.send(ctx, Request{Version: Version, Purpose: purpose, Step: step, Items: batch}, limit{c.opts.Timeout, "reward.timeout"})
		if err != nil {
			return nil, fmt.Errorf("%s: %s request of step %d (ids %d–%d): %w", c.name, purpose, step, lo, hi-1, err)
		}
		out = append(out, res...)
	}
	return out, nil
}

// Close stops the command (end of its stdin, then a kill after a grace
// period); for a url it does nothing.
func (c *Client) Close() error {
	if err := c.t.close(); err != nil {
		return fmt.Errorf("%s: %w", c.name, err)
	}
	return nil
}

// send makes one request and checks its answer. After any failure the
// client is unusable (nothing is retried).
func (c *Client) send(ctx context.Context, req Request, timeout limit) ([]Result, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, c.t.fail(err)
	}
	raw, err := c.t.roundTrip(ctx, body, timeout)
	if err != nil {
		return nil, err
	}
	first := 0
	if len(req.Items) > 0 {
		first = req.Items[0].ID
	}
	res, err := parseAnswer(raw, first, len(req.Items), c.opts.Range)
	if err != nil {
		return nil, c.t.fail(err)
	}
	return res, nil
}

// answer is the wire form of an answer; pointers tell absent from zero.
type answer struct {
	Rewards *[]struct {
		ID      *int     `json:"id"`
		Reward  *float64 `json:"reward"`
		Correct *bool    `json:"correct"`
	} `json:"rewards"`
}

// parseAnswer checks raw against a request of n items with ids first …
// first+n−1, each reward within rng, and returns their results in id order.
func parseAnswer(raw []byte, first, n int, rng [2]float64) ([]Result, error) {
	var a answer
	if err := json.Unmarshal(raw, &a); err != nil {
		hint := ""
		if strings.Contains(string(raw), "NaN") || strings.Contains(string(raw), "Infinity") {
			hint = "; rewards must be finite numbers (JSON has no NaN or Infinity)"
		}
		return nil, fmt.Errorf(`the answer is not JSON of the form {"rewards": [{"id": …, "reward": …}, …]}: %v%s; it began: %s`, err, hint, snippet(raw))
	}
	if a.Rewards == nil {
		return nil, fmt.Errorf(`the answer has no "rewards" list; it began: %s`, snippet(raw))
	}
	out := make([]Result, n)
	seen := make([]bool, n)
	for k, r := range *a.Rewards {
		if r.ID == nil {
			return nil, fmt.Errorf(`rewards[%d] has no "id"`, k)
		}
		id := *r.ID
		i := id - first
		if i < 0 || i >= n {
			if n == 0 {
				return nil, fmt.Errorf("rewards[%d]: unknown id %d (the request had no items)", k, id)
			}
			return nil, fmt.Errorf("rewards[%d]: unknown id %d (the request's ids are %d–%d)", k, id, first, first+n-1)
		}
		if seen[i] {
			return nil, fmt.Errorf("rewards[%d]: id %d answered twice", k, id)
		}
		seen[i] = true
		if r.Reward == nil {
			return nil, fmt.Errorf(`rewards[%d] (id %d) has no "reward"`, k, id)
		}
		v := *r.Reward
		if math.IsNaN(v) || math.IsInf(v, 0) || v < rng[0] || v > rng[1] {
			return nil, fmt.Errorf("rewards[%d] (id %d): reward %v is outside [%v, %v]", k, id, v, rng[0], rng[1])
		}
		out[i] = Result{Reward: v, Correct: v >= rng[1]}
		if r.Correct != nil {
			out[i].Correct = *r.Correct
		}
	}
	var missing []string
	count := 0
	for i, ok := range seen {
		if !ok {
			count++
			if len(missing) < 10 {
				missing = append(missing, fmt.Sprint(first+i))
			}
		}
	}
	if count > 0 {
		more := ""
		if count > len(missing) {
			more = ", …"
		}
		return nil, fmt.Errorf("no reward for %d of %d ids (%s%s)", count, n, strings.Join(missing, ", "), more)
	}
	return out, nil
}

// snippet quotes the start of b for an error message.
func snippet(b []byte) string {
	const max = 200
	s := string(b)
	if len(s) > max {
		return fmt.Sprintf("%q…", s[:max])
	}
	return fmt.Sprintf("%q", s)
}
