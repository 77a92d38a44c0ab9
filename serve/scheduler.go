package serve

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/hacrl/hacrl/model"
)

// errShutdown is the error of requests the scheduler drops when it stops.
var errShutdown = errors.New("the server is shutting down")

// job is one request's sequences (its choices), added to the batch together
// so that they all sample with the same weights.
type job struct {
	ctx   context.Context // the client's: when done, the job's sequences leave the batch
	seqs  []*seqJob
	start chan started // receives once when the sequences are added (buffered)

	mu     sync.Mutex
	events []event       // delivered and not yet taken
	done   bool          // every sequence has ended; events is final
	err    error         // why the job ended early, when it did
	notify chan struct{} // signalled (cap 1) when events or done change
}

// seqJob is one choice of a job.
type seqJob struct {
	prompt []int
	opt    model.SampleOptions
	rng    *rand.Rand  // nil for greedy decoding
	halt   atomic.Bool // set by the handler: stop decoding it (a stop string was found)
	id     int         // the batch's id, once added
	ended  bool        // scheduler-owned
}

// started tells a job which weights it samples with, or why it was not
// admitted.
type started struct {
	version string
	model   *model.Model
	err     error
}

// event is one new token of choice Choice.
type event struct {
	Choice int
	Token  model.Token
}

func newJob(ctx context.Context, seqs []*seqJob) *job {
	return &job{ctx: ctx, seqs: seqs, start: make(chan started, 1), notify: make(chan struct{}, 1)}
}

// push appends events and wakes the reader.
func (j *job) push(evs ...event) {
	j.mu.Lock()
	j.events = append(j.events, evs...)
	j.mu.Unlock()
	j.signal()
}

// finish marks the job done with err (nil: every sequence ended normally).
func (j *job) finish(err error) {
	j.mu.Lock()
	if !j.done {
		j.done, j.err = true, err
	}
	j.mu.Unlock()
	j.signal()
}

func (j *job) signal() {
	select {
	case j.notify <- struct{}{}:
	default:
	}
}

// next waits for events: it returns those delivered since the last call, and
// done with the job's error once every sequence has ended and nothing is left.
func (j *job) next() (evs []event, done bool, err error) {
	for {
		j.mu.Lock()
		evs, j.events = j.events, nil
		done, err = j.done, j.err
		j.mu.Unlock()
		if len(evs) > 0 || done {
			return evs, done && len(evs) == 0, err
		}
		<-j.notify
	}
}

// swapReq asks the scheduler to decode with m from now on.
type swapReq struct {
	m       *model.Model
	version string
	reply   chan swapReply
}

type swapReply struct {
	drained int // requests that were live or queued in the batch and finished on the old weights
	err     error
}

// Stats counts the scheduler's work since the server started.
type Stats struct {
	Steps       int64 // batch steps decoded
	SharedSteps int64 // steps that decoded tokens of two or more requests together
	MaxRequests int   // the most requests one step decoded together
	Live        int   // sequences live or waiting in the batch now
	Queued      int   // requests submitted and not yet in the batch
	Swaps       int64 // weight updates done
	Cancelled   int64 // sequences dropped because their client left
	InFlight    int   // generation requests holding a concurrency slot now (Server.Stats)
}

// scheduler owns the Batch: one goroutine takes new jobs between steps,
// decodes, delivers each token to its job and drops the sequences whose
// client left. Weight updates wait until the batch is empty, with admission
// paused, then replace the model and its batch.
type scheduler struct {
	rows, slots int
	submit      chan *job
	swaps       chan swapReq
	quit        chan struct{}
	stopped     chan struct{}
	logf        func(string, ...any)
	// Test hooks, set before the loop starts: admission waits until
	// admitWhen(pending requests) is true; beforeStep runs before each step.
	admitWhen  func(int) bool
	beforeStep func()

	// owned by the loop goroutine
	m       *model.Model
	version string
	batch   *model.Batch
	pending []*job
	live    map[int]liveSeq // batch id → its job and choice

	// current is the model and version new jobs will sample with (read by
	// handlers for /get_weight_version and scoring).
	current atomic.Pointer[started]
	stats   struct {
		sync.Mutex
		Stats
	}
}

type liveSeq struct {
	job    *job
	choice int
}

func newScheduler(m *model.Model, version string, rows, slots int, logf func(string, ...any)) (*scheduler, error) {
	b, err := m.NewBatch(rows, slots)
	if err != nil {
		return nil, fmt.Errorf("serve: %w (hacrl serve needs the native engine: a float32 model on the CPU)", err)
	}
	s := &scheduler{rows: rows, slots: slots, submit: make(chan *job), swaps: make(chan swapReq),
		quit: make(chan struct{}), stopped: make(chan struct{}), logf: logf,
		m: m, version: version, batch: b, live: map[int]liveSeq{}}
	s.current.Store(&started{version: version, model: m})
	return s, nil
}

// enqueue hands j to the scheduler; it fails when the scheduler stopped or
// ctx ended first.
func (s *scheduler) enqueue(ctx context.Context, j *job) error {
	select {
	case s.submit <- j:
		return nil
	case <-s.quit:
		return errShutdown
	case <-ctx.Done():
		return ctx.Err()
	}
}

// swap replaces the weights between batches; see Server.UpdateWeights.
func (s *scheduler) swap(ctx context.Context, m *model.Model, version string) (int, error) {
	r := swapReq{m: m, version: version, reply: make(chan swapReply, 1)}
	select {
	case s.swaps <- r:
	case <-s.quit:
		return 0, errShutdown
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	select {
	case rep := <-r.reply:
		return rep.drained, rep.err
	case <-s.stopped:
		return 0, errShutdown
	}
}

// stop ends the loop, failing what is live or queued, and waits for it.
func (s *scheduler) stop() {
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	<-s.stopped
}

func (s *scheduler) snapshot() Stats {
	s.stats.Lock()
	defer s.stats.Unlock()
	return s.stats.Stats
}

// start runs the loop.
func (s *scheduler) start() { go s.loop() }

func (s *scheduler) loop() {
	defer close(s.stopped)
	var st loopState
	for s.iterate(&st) {
	}
}

// loopState is what the loop carries between iterations: a weight update
// waiting for the batch to empty, and how many requests it waits for.
type loopState struct {
	swap    *swapReq
	drained int
}

// iterate is one turn of the loop: take what arrived, swap the weights
// when an update waits and the batch is empty, admit, drop the sequences
// whose client left, and decode a step. It reports false when the server
// stops. A panic fails the jobs in the batch, not the server.
func (s *scheduler) iterate(st *loopState) (more bool) {
	defer func() {
		if r := recover(); r != nil {
			s.logf("serve: scheduler panic: %v", r)
			s.failLive(fmt.Errorf("serve: internal error: %v", r))
			more = true
		}
	}()
	idle := s.batch.Len() == 0 && st.swap == nil && (len(s.pending) == 0 || !s.admitReady())
	if !s.receive(idle, &st.swap) {
		s.shutdown(st.swap)
		return false
	}
	if st.swap != nil && s.batch.Len() == 0 {
		s.doSwap(*st.swap, st.drained)
		st.swap, st.drained = nil, 0
	}
	if st.swap == nil && s.admitReady() {
		s.admit()
	} else if st.swap != nil && st.drained == 0 {
		st.drained = s.requestsLive()
	}
	s.dropLeft()
	s.step()
	s.setQueued()
	return true
}

// receive takes new jobs and a swap request: waiting for one when idle,
// else only those already sent. It reports false when the server stops.
func (s *scheduler) receive(idle bool, swap **swapReq) bool {
	if idle {
		select {
		case j := <-s.submit:
			s.pending = append(s.pending, j)
		case r := <-s.swaps:
			*swap = &r
		case <-s.quit:
			return false
		}
	}
	for {
		swaps := s.swaps
		if *swap != nil {
			swaps = nil // one at a time
		}
		select {
		case j := <-s.submit:
			s.pending = append(s.pending, j)
		case r := <-swaps:
			*swap = &r
		case <-s.quit:
			return false
		default:
			s.setQueued()
			return true
		}
	}
}

func (s *scheduler) setQueued() {
	s.stats.Lock()
	s.stats.Queued, s.stats.Live = len(s.pending), s.batch.Len()
	s.stats.Unlock()
}

func (s *scheduler) admitReady() bool {
	return s.admitWhen == nil || s.admitWhen(len(s.pending))
}

// admit adds the pending jobs' sequences to the batch.
func (s *scheduler) admit() {
	for _, j := range s.pending {
		if err := j.ctx.Err(); err != nil {
			j.start <- started{err: err}
			continue
		}
		var err error
		added := 0
		for k, sq := range j.seqs {
			if sq.id, err = s.batch.Add(sq.prompt, sq.opt, sq.rng); err != nil {
				break
			}
			s.live[sq.id] = liveSeq{job: j, choice: k}
			added++
		}
		if err != nil {
			for _, sq := range j.seqs[:added] {
				s.batch.Cancel(sq.id)
				delete(s.live, sq.id)
			}
			j.start <- started{err: fmt.Errorf("serve: %w", err)}
			continue
		}
		j.start <- started{version: s.version, model: s.m}
	}
	s.pending = s.pending[:0]
}

// requestsLive counts the distinct jobs with sequences in the batch.
func (s *scheduler) requestsLive() int {
	seen := map[*job]bool{}
	for _, l := range s.live {
		seen[l.job] = true
	}
	return len(seen)
}

// dropLeft cancels the sequences whose client left or whose handler halted them.
func (s *scheduler) dropLeft() {
	for id, l := range s.live {
		sq := l.job.seqs[l.choice]
		left := l.job.ctx.Err() != nil
		if !left && !sq.halt.Load() {
			continue
		}
		s.batch.Cancel(id)
		if left {
			s.stats.Lock()
			s.stats.Cancelled++
			s.stats.Unlock()
		}
		s.end(id)
	}
}

// end removes sequence id; its job finishes when it was the last one.
func (s *scheduler) end(id int) {
	l := s.live[id]
	delete(s.live, id)
	sq := l.job.seqs[l.choice]
	sq.ended = true
	for _, o := range l.job.seqs {
		if !o.ended {
			return
		}
	}
	l.job.finish(l.job.ctx.Err())
}

// step decodes one token for every live sequence and delivers them. A panic
// or an error of the engine fails the jobs in the batch, not the server.
func (s *scheduler) step() {
	if s.batch.Len() == 0 {
		return
	}
	if s.beforeStep != nil {
		s.beforeStep()
	}
	tokens, err := s.safeStep()
	if err != nil {
		s.logf("serve: decoding step failed: %v", err)
		s.failLive(fmt.Errorf("serve: decoding failed: %w", err))
		return
	}
	byJob := map[*job][]event{}
	for _, t := range tokens {
		l, ok := s.live[t.Seq]
		if !ok {
			continue
		}
		byJob[l.job] = append(byJob[l.job], event{Choice: l.choice, Token: t})
	}
	for j, evs := range byJob {
		j.push(evs...)
	}
	for _, t := range tokens {
		if t.Done {
			if _, ok := s.live[t.Seq]; ok {
				s.end(t.Seq)
			}
		}
	}
	s.stats.Lock()
	s.stats.Steps++
	if len(byJob) > 1 {
		s.stats.SharedSteps++
	}
	s.stats.MaxRequests = max(s.stats.MaxRequests, len(byJob))
	s.stats.Live = s.batch.Len()
	s.stats.Unlock()
}

func (s *scheduler) safeStep() (tokens []model.Token, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return s.batch.Step(context.Background())
}

// failLive ends every live sequence with err and starts a fresh batch (a
// failed step may have left the old one inconsistent).
func (s *scheduler) failLive(err error) {
	for id, l := range s.live {
		delete(s.live, id)
		l.job.finish(err)
	}
	s.batch.Close()
	b, nerr := s.m.NewBatch(s.rows, s.slots)
	if nerr != nil {
		s.logf("serve: a new batch: %v", nerr)
		return // keep the closed batch: it is empty and still usable for Len
	}
	s.batch = b
}

// doSwap replaces the model with r's, the batch being empty.
func (s *scheduler) doSwap(r swapReq, drained int) {
	s.batch.Close()
	b, err := r.m.NewBatch(s.rows, s.slots)
	if err != nil {
		// Keep serving the old weights.
		old, oerr := s.m.NewBatch(s.rows, s.slots)
		if oerr == nil {
			s.batch = old
		}
		r.reply <- swapReply{err: fmt.Errorf("serve: the new weights: %w", err)}
		return
	}
	s.batch, s.m, s.version = b, r.m, r.version
	s.current.Store(&started{version: r.version, model: r.m})
	s.stats.Lock()
	s.stats.Swaps++
	s.stats.Unlock()
	r.reply <- swapReply{drained: drained}
}

// shutdown fails what is live or queued and a pending swap.
func (s *scheduler) shutdown(swap *swapReq) {
	for id, l := range s.live {
		delete(s.live, id)
		l.job.finish(errShutdown)
	}
	for _, j := range s.pending {
		j.start <- started{err: errShutdown}
	}
	s.pending = nil
	if swap != nil {
		swap.reply <- swapReply{err: errShutdown}
	}
	s.batch.Close()
}
