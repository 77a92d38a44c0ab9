package mlflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/hacrl/hacrl/internal/atomicfile"
	"github.com/hacrl/hacrl/metrics"
)

// StateFile is the file in a run's output directory that names the MLflow
// run it logs to, so that a resumed run continues it.
const StateFile = "mlflow.json"

// state is StateFile's content.
type state struct {
	URI          string `json:"uri"`
	ExperimentID string `json:"experiment_id"`
	RunID        string `json:"run_id"`
}

// Options configure a Tracker.
type Options struct {
	URI        string // the tracking server, http://HOST:PORT
	Experiment string // the experiment's name; created when missing
	RunName    string
	Token      string       // bearer token; "" sends none
	Dir        string       // the run's output directory, which holds StateFile
	Resume     bool         // continue the MLflow run named in Dir/StateFile, if any
	Tags       []Tag        // set when the run is created
	Params     []Param      // logged once, when the run is created or continued
	Log        func(string) // warnings and the final report; nil: discarded

	// MaxPending is the most batches waiting for the server; when one more
	// comes, the oldest is dropped (and counted). Default 10000.
	MaxPending int
	// FlushTimeout bounds Close's wait for the server. Default 30 s.
	FlushTimeout time.Duration
	// RequestTimeout bounds each request. Default 20 s.
	RequestTimeout time.Duration
	// Linger is how long the records of a step wait for more of the same
	// step before they go as one batch. Default 500 ms.
	Linger time.Duration
	// MaxBackoff caps the wait between retries. Default 10 s.
	MaxBackoff time.Duration
}

// batch is the metrics of one step, as MLflow logs them.
type batch struct {
	seq     int // order of sealing
	step    int
	metrics []Metric
}

// Tracker logs a training run's metrics to an MLflow run in the background.
// Record never blocks on the server; Close flushes what is left.
type Tracker struct {
	opts   Options
	client *Client
	log    func(string)

	mu       sync.Mutex
	open     *batch // the step being gathered
	lastAdd  time.Time
	queue    []batch // sealed, oldest first
	closing  bool
	deadline time.Time // Close's: the sender gives up after it
	seq      int
	wake     chan struct{}
	done     chan struct{}
	dropped  int  // batches dropped
	droppedM int  // their metrics
	sent     int  // batches logged
	warned   bool // the server's absence was logged
	refused  bool // a refused batch was logged
	lastErr  error
	runID    string
	latest   map[string]int64 // a continued run's highest logged step per key
	disabled error            // a permanent error: nothing more is sent
}

// Start checks the options, reads Dir/StateFile when resuming, and starts
// the background sender. It does not wait for the server: one that is down
// or slow only delays the logging.
func Start(opts Options) (*Tracker, error) {
	if opts.Experiment == "" {
		return nil, errors.New("mlflow: no experiment name")
	}
	if opts.MaxPending <= 0 {
		opts.MaxPending = 10000
	}
	if opts.FlushTimeout <= 0 {
		opts.FlushTimeout = 30 * time.Second
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 20 * time.Second
	}
	if opts.Linger <= 0 {
		opts.Linger = 500 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 10 * time.Second
	}
	c, err := NewClient(opts.URI, opts.Token, opts.RequestTimeout)
	if err != nil {
		return nil, err
	}
	t := &Tracker{opts: opts, client: c, log: opts.Log, wake: make(chan struct{}, 1), done: make(chan struct{})}
	if t.log == nil {
		t.log = func(string) {}
	}
	path := filepath.Join(opts.Dir, StateFile)
	if opts.Resume {
		data, err := os.ReadFile(path)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("mlflow: %w", err)
		default:
			var s state
			if err := json.Unmarshal(data, &s); err != nil || s.RunID == "" {
				return nil, fmt.Errorf("mlflow: %s: not the MLflow run of this output directory (want {\"uri\", \"experiment_id\", \"run_id\"}; delete it to log to a new run)", path)
			}
			if s.URI != opts.URI {
				t.log(fmt.Sprintf("mlflow: %s names a run on %s; the config's tracking.mlflow.uri is %s: logging to a new run there", path, s.URI, opts.URI))
			} else {
				t.runID = s.RunID
			}
		}
	}
	if t.runID == "" {
		// A fresh run, or one on another server: a stale state file would
		// make a later resume continue the wrong run.
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("mlflow: %w", err)
		}
	}
	go t.send()
	return t, nil
}

// Record queues rec's metrics: those of an agent as "<agent>/<key>", the
// run-wide ones as they are, at rec's step and time. Records of one step
// that come together go as one batch. It implements metrics.Sink.
func (t *Tracker) Record(rec metrics.Record) {
	if len(rec.Values) == 0 {
		return
	}
	ts := int64(rec.Time * 1000)
	if rec.Time == 0 {
		ts = time.Now().UnixMilli()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closing {
		return
	}
	if t.open != nil && t.open.step != rec.Step {
		t.seal()
	}
	if t.open == nil {
		t.open = &batch{step: rec.Step}
	}
	for _, k := range metrics.SortedKeys(rec.Values) {
		key := k
		if rec.Agent != "" {
			key = rec.Agent + "/" + k
		}
		t.open.metrics = append(t.open.metrics, Metric{Key: Key(key), Value: Float(rec.Values[k]), Timestamp: ts, Step: int64(rec.Step)})
	}
	t.lastAdd = time.Now()
	t.signal()
}

// seal moves the open batch to the queue, dropping the oldest one when the
// queue is full. t.mu is held.
func (t *Tracker) seal() {
	if t.open == nil {
		return
	}
	if len(t.queue) >= t.opts.MaxPending {
		t.dropped++
		t.droppedM += len(t.queue[0].metrics)
		t.queue = t.queue[1:]
	}
	t.seq++
	t.open.seq = t.seq
	t.queue = append(t.queue, *t.open)
	t.open = nil
}

func (t *Tracker) signal() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// keyChars are the characters MLflow refuses in a metric name: it allows
// Python's \w (letters and digits of any script, and _), - . space / and :
// (mlflow/utils/validation.py).
var keyChars = regexp.MustCompile(`[^\p{L}\p{N}_\-. /:]`)

// Key is the MLflow metric name of a hacrl metric key: every character MLflow
// refuses in a name becomes '_', so "eval/test/avg@4" is logged as
// "eval/test/avg_4".
func Key(k string) string { return keyChars.ReplaceAllString(k, "_") }

// send runs in the background: it makes (or finds) the MLflow run, then
// logs the queued batches in order, retrying with backoff while the server
// cannot be reached.
func (t *Tracker) send() {
	defer close(t.done)
	ctx := context.Background()
	for attempt := 0; ; attempt++ {
		err := t.setup(ctx)
		if err == nil {
			break
		}
		if !t.retry(err, attempt) {
			return
		}
	}
	attempt := 0
	for {
		t.mu.Lock()
		if len(t.queue) == 0 && t.open != nil && (t.closing || time.Since(t.lastAdd) >= t.opts.Linger) {
			t.seal()
		}
		if len(t.queue) == 0 {
			closing, open := t.closing, t.open != nil
			t.mu.Unlock()
			if closing {
				return
			}
			var timer <-chan time.Time
			if open {
				timer = time.After(t.opts.Linger)
			}
			select {
			case <-t.wake:
			case <-timer:
			}
			continue
		}
		b := t.queue[0]
		t.mu.Unlock()
		err := t.client.LogBatch(ctx, t.runID, t.fresh(b.metrics), nil, nil)
		if err != nil && Retryable(err) {
			if !t.retry(err, attempt) {
				return
			}
			attempt++
			continue
		}
		attempt = 0
		t.mu.Lock()
		if len(t.queue) > 0 && t.queue[0].seq == b.seq { // not dropped meanwhile
			t.queue = t.queue[1:]
		}
		if err != nil {
			t.dropped++
			t.droppedM += len(b.metrics)
			t.lastErr = err
			first := !t.refused
			t.refused = true
			t.mu.Unlock()
			if first { // the rest are counted in Close's report
				t.log(fmt.Sprintf("mlflow: the server refused step %d's metrics, which are dropped: %v", b.step, err))
			}
			continue
		}
		t.sent++
		t.mu.Unlock()
	}
}

// fresh leaves out what a continued run logged before it was resumed:
// MLflow keeps every value logged, so a step logged again would count twice.
func (t *Tracker) fresh(ms []Metric) []Metric {
	if t.latest == nil {
		return ms
	}
	out := ms[:0:0]
	for _, m := range ms {
		if last, ok := t.latest[m.Key]; !ok || m.Step > last {
			out = append(out, m)
		}
	}
	return out
}

// retry waits before the next attempt after a retryable err and says
// whether to go on: a permanent err, or Close's deadline passing, ends the
// sending (what is left is counted as dropped).
func (t *Tracker) retry(err error, attempt int) bool {
	t.mu.Lock()
	t.lastErr = err
	warn := !t.warned
	t.warned = true
	closing, late := t.closing, t.closing && time.Now().After(t.deadline)
	t.mu.Unlock()
	if late {
		return false
	}
	if !Retryable(err) {
		t.mu.Lock()
		t.disabled = err
		t.mu.Unlock()
		t.log(fmt.Sprintf("%v; this run is not logged to MLflow (training goes on)", err))
		return false
	}
	if warn {
		t.log(fmt.Sprintf("%v; training goes on, and the metrics wait (at most %d steps) for the server", err, t.opts.MaxPending))
	}
	d := min(t.opts.MaxBackoff, 250*time.Millisecond<<min(attempt, 10))
	d = d/2 + rand.N(d/2+1) // jitter
	if closing {
		d = min(d, 500*time.Millisecond)
	}
	time.Sleep(d)
	return true
}

// setup finds the run to log to: the one a resumed run continues (its
// latest logged steps read back, its status set to RUNNING again), or a new
// one, whose id is written to Dir/StateFile. Params are logged either way.
func (t *Tracker) setup(ctx context.Context) error {
	o := t.opts
	if t.runID != "" {
		run, err := t.client.GetRun(ctx, t.runID)
		if err != nil {
			return err
		}
		latest := map[string]int64{}
		for _, m := range run.Data.Metrics {
			latest[m.Key] = max(latest[m.Key], m.Step)
		}
		if err := t.client.UpdateRun(ctx, t.runID, Running, time.Time{}); err != nil {
			return err
		}
		t.latest = latest
		if err := t.client.LogBatch(ctx, t.runID, nil, o.Params, nil); err != nil {
			return err
		}
		t.log(fmt.Sprintf("mlflow: continuing run %s", runURL(o.URI, run.Info.ExperimentID, t.runID)))
		return nil
	}
	exp, err := t.client.ExperimentID(ctx, o.Experiment)
	if err != nil {
		return err
	}
	id, err := t.client.CreateRun(ctx, exp, o.RunName, time.Now(), o.Tags)
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(state{URI: o.URI, ExperimentID: exp, RunID: id}, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(o.Dir, StateFile), append(data, '\n')); err != nil {
		// Without the file a resume would log to a new run: say so, and
		// log this one all the same.
		t.log(fmt.Sprintf("mlflow: %v (a resumed run will log to a new MLflow run)", err))
	}
	t.mu.Lock()
	t.runID = id
	t.mu.Unlock()
	if err := t.client.LogBatch(ctx, id, nil, o.Params, nil); err != nil {
		return err
	}
	t.log(fmt.Sprintf("mlflow: logging to run %s", runURL(o.URI, exp, id)))
	return nil
}

// runURL is the run's page in MLflow's web UI.
func runURL(uri, experimentID, runID string) string {
	return fmt.Sprintf("%s/#/experiments/%s/runs/%s", strings.TrimRight(uri, "/"), experimentID, runID)
}

// RunID returns the MLflow run's id once the server made it ("" before).
func (t *Tracker) RunID() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.runID
}

// Close sends what is left, waiting at most Options.FlushTimeout, sets the
// run's status (Finished, Failed or Killed) and reports in the log what
// could not be logged. It never fails the training run.
func (t *Tracker) Close(status string) {
	t.mu.Lock()
	if t.closing {
		t.mu.Unlock()
		return
	}
	deadline := time.Now().Add(t.opts.FlushTimeout)
	t.closing, t.deadline = true, deadline
	t.seal()
	t.mu.Unlock()
	t.signal()
	select {
	case <-t.done:
	case <-time.After(t.opts.FlushTimeout):
	}
	t.mu.Lock()
	runID, pending := t.runID, len(t.queue)
	for _, b := range t.queue {
		t.droppedM += len(b.metrics)
	}
	t.dropped += pending
	t.queue = nil
	dropped, droppedM, sent, lastErr, disabled := t.dropped, t.droppedM, t.sent, t.lastErr, t.disabled
	t.mu.Unlock()
	if runID != "" && disabled == nil {
		ctx, cancel := context.WithDeadline(context.Background(), deadline.Add(t.opts.RequestTimeout))
		if err := t.client.UpdateRun(ctx, runID, status, time.Now()); err != nil {
			t.log(fmt.Sprintf("mlflow: run %s: setting its status to %s: %v", runID, status, err))
		}
		cancel()
	}
	switch {
	case runID == "":
		t.log(fmt.Sprintf("mlflow: no MLflow run was made, and the metrics of %d steps (%d values) were not logged (last error: %v)", dropped, droppedM, lastErr))
	case dropped > 0:
		t.log(fmt.Sprintf("mlflow: the metrics of %d of %d steps (%d values) were not logged to MLflow run %s (last error: %v)", dropped, dropped+sent, droppedM, runID, lastErr))
	}
}

// Dropped returns the number of batches (a step's metrics each) that were
// not logged and their metric values, so far.
func (t *Tracker) Dropped() (batches, values int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.dropped, t.droppedM
}
