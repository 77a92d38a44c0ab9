package bus

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The envelope: a payload travels as chunks, one message each, whose headers
// say where the chunk belongs. The body is the chunk's bytes, nothing else.
const (
	hdrVersion = "Hacrl-Bus"    // envelope version, envelopeVersion
	hdrAgent   = "Hacrl-Agent"  // the agent's name, as given
	hdrStep    = "Hacrl-Step"   // the step
	hdrChunk   = "Hacrl-Chunk"  // "i/n": chunk i (from 0) of n
	hdrOffset  = "Hacrl-Offset" // where the chunk starts in the payload
	hdrSize    = "Hacrl-Size"   // the whole payload's length
	hdrSum     = "Hacrl-Sha256" // the whole payload's SHA-256, hex

	envelopeVersion = "1"
)

// chunkHeadroom is what a chunk leaves of the server's max payload for its
// headers (message id, envelope) — far more than they take.
const chunkHeadroom = 4 << 10

func chunkSize(maxPayload int64) int {
	return int(max(maxPayload-chunkHeadroom, 1<<10))
}

func (r *Run) subject(step int, agent string) string {
	return stepPrefix(r.id) + strconv.Itoa(step) + "." + token(agent)
}

// Publish stores agent's payload for step on the run's stream, split into
// chunks below the server's max payload, and returns once the server has
// stored every chunk. It is idempotent: each chunk's message id is
// run/step/agent/chunk, so publishing the same payload again (a restarted
// agent) stores nothing new.
func (r *Run) Publish(ctx context.Context, step int, agent string, payload []byte) error {
	return r.publish(ctx, step, agent, payload, nil)
}

// publish publishes the chunks of payload for which only returns true (all
// when only is nil): a publisher that crashed midway stored some of them.
func (r *Run) publish(ctx context.Context, step int, agent string, payload []byte, only func(chunk int) bool) error {
	if err := checkAgent(agent); err != nil {
		return err
	}
	if step < 0 {
		return fmt.Errorf("bus: run %s: publish: step must be ≥ 0, got %d", r.id, step)
	}
	sum := sha256.Sum256(payload)
	n := max((len(payload)+r.chunk-1)/r.chunk, 1)
	todo := make([]int, 0, n)
	for i := range n {
		if only == nil || only(i) {
			todo = append(todo, i)
		}
	}
	// Send every chunk left, wait for the acknowledgements, and send again
	// those that failed (a server restarting, a link down): until all are
	// stored, or the connection's wait ends (a *WaitError) or ctx does.
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, r.conn.wait)
	defer cancel()
	var last error // the last error other than the wait's end
	for attempt := 1; len(todo) > 0; attempt++ {
		var err error
		todo, err = r.sendChunks(wctx, step, agent, payload, sum, n, todo)
		if err == nil {
			continue
		}
		if !errors.Is(err, context.DeadlineExceeded) || last == nil {
			last = err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("bus: run %s: publish step %d of agent %q: %d of %d chunks not stored after %d attempts: %w (last error: %v)",
				r.id, step, agent, len(todo), n, attempt, ctx.Err(), last)
		}
		if wctx.Err() != nil {
			return &WaitError{Run: r.id, Server: r.conn.where, Waited: time.Since(start), Last: last,
				What: fmt.Sprintf("publish step %d of agent %q (%d of %d chunks not stored after %d attempts)", step, agent, len(todo), n, attempt)}
		}
		pause(wctx, err)
	}
	return nil
}

// sendChunks publishes the chunks todo and returns those not acknowledged,
// with the first error.
func (r *Run) sendChunks(ctx context.Context, step int, agent string, payload []byte, sum [32]byte, n int, todo []int) ([]int, error) {
	acks := make([]jetstream.PubAckFuture, 0, len(todo))
	var failed []int
	var first error
	for k, i := range todo {
		m := r.chunkMsg(step, agent, payload, sum, i, n)
		id := fmt.Sprintf("%s/%d/%s/%d", r.id, step, token(agent), i)
		f, err := r.conn.js.PublishMsgAsync(m, jetstream.WithMsgID(id), jetstream.WithExpectStream(streamName(r.id)))
		if err != nil {
			failed, first = append(failed, todo[k:]...), err
			break
		}
		acks = append(acks, f)
	}
	for k, f := range acks {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			failed = append(failed, todo[k])
			if first == nil {
				first = fmt.Errorf("chunk %s: %w", f.Msg().Header.Get(hdrChunk), err)
			}
		case <-ctx.Done():
			return append(failed, todo[k:len(acks)]...), ctx.Err()
		}
	}
	slices.Sort(failed)
	return failed, first
}

// chunkMsg is chunk i of n of payload, whose SHA-256 is sum.
func (r *Run) chunkMsg(step int, agent string, payload []byte, sum [32]byte, i, n int) *nats.Msg {
	lo, hi := i*r.chunk, min((i+1)*r.chunk, len(payload))
	m := nats.NewMsg(r.subject(step, agent))
	m.Data = payload[lo:hi]
	m.Header.Set(hdrVersion, envelopeVersion)
	m.Header.Set(hdrAgent, agent)
	m.Header.Set(hdrStep, strconv.Itoa(step))
	m.Header.Set(hdrChunk, fmt.Sprintf("%d/%d", i, n))
	m.Header.Set(hdrOffset, strconv.Itoa(lo))
	m.Header.Set(hdrSize, strconv.Itoa(len(payload)))
	m.Header.Set(hdrSum, hex.EncodeToString(sum[:]))
	return m
}

// MissingError says which agents' payloads a Collect did not get in time.
type MissingError struct {
	Run     string
	Step    int
	Missing []string       // agents with no complete payload, in the order asked
	Partial map[string]int // of those, chunks received from agents that sent some
	Chunks  map[string]int // and how many chunks those agents' payloads have
	Waited  time.Duration
	// Last is the error the last read met (a server unreachable); nil when
	// reading went well, with nothing to read.
	Last error
}

func (e *MissingError) Error() string {
	parts := make([]string, len(e.Missing))
	for i, a := range e.Missing {
		parts[i] = strconv.Quote(a)
		if got, ok := e.Partial[a]; ok {
			parts[i] += fmt.Sprintf(" (%d of %d chunks)", got, e.Chunks[a])
		}
	}
	msg := fmt.Sprintf("bus: run %s step %d: waited %v, still missing the payload of %s",
		e.Run, e.Step, e.Waited.Round(time.Millisecond), strings.Join(parts, ", "))
	if e.Last != nil {
		msg += " (last error: " + e.Last.Error() + ")"
	}
	return msg
}

// Collect waits until the payload of every named agent for step is on the
// stream, and returns them by agent. It waits at most timeout; then it
// returns a *MissingError naming the agents still missing. A payload whose
// checksum or size does not match what its publisher recorded is an error.
func (r *Run) Collect(ctx context.Context, step int, agents []string, timeout time.Duration) (map[string][]byte, error) {
	return r.CollectWatching(ctx, step, agents, timeout, nil)
}

// Waiting is what a Collect still waits for.
type Waiting struct {
	Missing []string // agents whose payload is not complete yet, in the order asked
	Last    error    // the error reading last met (a server unreachable); nil once reading goes on
}

// CollectWatching is Collect telling watch (when not nil) what it waits for:
// once before it reads, and again whenever that changes. watch runs in the
// caller's goroutine and must not block.
func (r *Run) CollectWatching(ctx context.Context, step int, agents []string, timeout time.Duration, watch func(Waiting)) (map[string][]byte, error) {
	if timeout <= 0 {
		return nil, fmt.Errorf("bus: run %s: collect step %d: timeout must be positive, got %v", r.id, step, timeout)
	}
	if len(agents) == 0 {
		return map[string][]byte{}, nil
	}
	asm := make(map[string]*assembly, len(agents))
	subjects := make([]string, len(agents))
	for i, a := range agents {
		if err := checkAgent(a); err != nil {
			return nil, err
		}
		if asm[a] != nil {
			return nil, fmt.Errorf("bus: run %s: collect step %d: agent %q named twice", r.id, step, a)
		}
		asm[a] = &assembly{}
		subjects[i] = r.subject(step, a)
	}
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := collector{r: r, step: step, agents: agents, subjects: subjects, asm: asm, left: len(agents), watch: watch}
	c.notify(nil)
	var last error // the error the last round met (nil: it read, or had nothing to read)
	for c.left > 0 {
		if err := c.round(wctx); err != nil {
			if errors.Is(err, errStalled) {
				last = nil
				continue
			}
			if wctx.Err() == nil && !errors.Is(err, errBadPayload) {
				last = err
				c.notify(err)
				continue
			}
			if errors.Is(err, errBadPayload) {
				return nil, err
			}
			return nil, r.collectErr(ctx, step, agents, asm, start, last)
		}
	}
	out := make(map[string][]byte, len(agents))
	for a, as := range asm {
		out[a] = as.buf
	}
	return out, nil
}

// stallAfter is how long Collect reads nothing before it reads again through
// a new consumer, from where it stopped: a pull lost to a server restart or a
// reconnect costs this long, not the whole timeout.
const stallAfter = 2 * time.Second

var (
	errStalled    = errors.New("no message for " + stallAfter.String())
	errBadPayload = errors.New("bad payload")
)

// collector reads one step's chunks, in rounds: one ordered consumer each,
// starting after the last message the previous round read.
type collector struct {
	r        *Run
	step     int
	agents   []string
	subjects []string
	asm      map[string]*assembly
	left     int    // agents not complete yet
	next     uint64 // stream sequence to read from; 0 = the start
	watch    func(Waiting)
	told     error // the error watch last heard
}

// notify tells watch what the collector waits for, with last the error
// reading met (nil: reading went on).
func (c *collector) notify(last error) {
	if c.watch == nil {
		return
	}
	c.told = last
	w := Waiting{Last: last}
	for _, a := range c.agents {
		if !c.asm[a].done() {
			w.Missing = append(w.Missing, a)
		}
	}
	c.watch(w)
}

func (c *collector) round(ctx context.Context) error {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: c.subjects}
	if c.next > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, c.next
	}
	// A request lost with a dying connection waits as long as its context:
	// give it a round's worth, not the whole timeout.
	cctx, cancel := context.WithTimeout(ctx, stallAfter)
	cons, err := c.r.stream.OrderedConsumer(cctx, cfg)
	cancel()
	if err != nil {
		return pause(ctx, err)
	}
	it, err := cons.Messages(jetstream.PullMaxBytes(max(8*c.r.chunk, 64<<20)))
	if err != nil {
		return pause(ctx, err)
	}
	defer it.Stop()
	for c.left > 0 {
		nctx, cancel := context.WithTimeout(ctx, stallAfter)
		m, err := it.Next(jetstream.NextContext(nctx))
		cancel()
		if err != nil {
			if ctx.Err() == nil && nctx.Err() != nil {
				return errStalled
			}
			return pause(ctx, err)
		}
		if md, err := m.Metadata(); err == nil {
			c.next = md.Sequence.Stream + 1
		}
		if c.told != nil {
			c.notify(nil)
		}
		if err := c.add(m); err != nil {
			return fmt.Errorf("bus: run %s: collect step %d: %w: %w", c.r.id, c.step, errBadPayload, err)
		}
	}
	return nil
}

func (c *collector) add(m jetstream.Msg) error {
	a := m.Headers().Get(hdrAgent)
	as := c.asm[a]
	if as == nil {
		return fmt.Errorf("message on %s names agent %q", m.Subject(), a)
	}
	done := as.done()
	if err := as.add(m.Headers(), m.Data()); err != nil {
		return fmt.Errorf("agent %q: %w", a, err)
	}
	if !done && as.done() {
		if err := as.verify(); err != nil {
			return fmt.Errorf("agent %q: %w", a, err)
		}
		c.left--
		c.notify(nil)
	}
	return nil
}

// pause waits a moment after a transient error (a server restarting) and
// returns it.
func pause(ctx context.Context, err error) error {
	select {
	case <-ctx.Done():
	case <-time.After(100 * time.Millisecond):
	}
	return err
}

// collectErr turns a wait that ended into a *MissingError when the timeout
// ended it, and into ctx's error when the caller's ctx did.
func (r *Run) collectErr(ctx context.Context, step int, agents []string, asm map[string]*assembly, start time.Time, last error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("bus: run %s: collect step %d: %w", r.id, step, ctx.Err())
	}
	e := &MissingError{Run: r.id, Step: step, Waited: time.Since(start), Partial: map[string]int{}, Chunks: map[string]int{}, Last: last}
	for _, a := range agents {
		as := asm[a]
		if as.done() {
			continue
		}
		e.Missing = append(e.Missing, a)
		if as.n > 0 {
			e.Partial[a], e.Chunks[a] = as.got, as.n
		}
	}
	return e
}

// assembly puts one agent's chunks back together. The first copy of a chunk
// wins: a re-publish beyond the server's dedupe window adds nothing. It
// holds only the bytes that arrived, never what the headers claim: a
// damaged header (a size of 2^62, a chunk count of 10^12) is refused or
// leaves the payload incomplete, and cannot make it allocate or panic.
type assembly struct {
	n, got int
	size   int
	sum    string
	chunks map[int]piece // by chunk index
	held   int           // bytes in chunks
	buf    []byte        // the payload, once verify has put it together
}

// piece is one chunk's bytes and where they start in the payload.
type piece struct {
	off  int
	data []byte
}

func (as *assembly) done() bool { return as.n > 0 && as.got == as.n }

func (as *assembly) add(h nats.Header, data []byte) error {
	if v := h.Get(hdrVersion); v != envelopeVersion {
		return fmt.Errorf("envelope version %q, this build reads %q", v, envelopeVersion)
	}
	var i, n int
	if _, err := fmt.Sscanf(h.Get(hdrChunk), "%d/%d", &i, &n); err != nil || n < 1 || i < 0 || i >= n {
		return fmt.Errorf("bad %s header %q", hdrChunk, h.Get(hdrChunk))
	}
	size, err := strconv.Atoi(h.Get(hdrSize))
	if err != nil || size < 0 {
		return fmt.Errorf("bad %s header %q", hdrSize, h.Get(hdrSize))
	}
	if n > max(size, 1) { // every chunk but the one of an empty payload holds a byte
		return fmt.Errorf("bad %s header %q for a payload of %d bytes", hdrChunk, h.Get(hdrChunk), size)
	}
	sum := h.Get(hdrSum)
	if as.n > 0 && (n != as.n || size != as.size || sum != as.sum) {
		// A payload published again with other contents (a non-deterministic
		// restart): the first one stands, the other is refused loudly.
		return fmt.Errorf("chunk %d/%d of a payload of %d bytes (sha256 %.12s…) mixes with one of %d chunks, %d bytes (sha256 %.12s…)",
			i, n, size, sum, as.n, as.size, as.sum)
	}
	if _, ok := as.chunks[i]; ok {
		return nil
	}
	lo, err := strconv.Atoi(h.Get(hdrOffset))
	if err != nil || lo < 0 || lo > size || len(data) > size-lo {
		return fmt.Errorf("chunk %d/%d of %d bytes at offset %q does not fit a payload of %d bytes", i, n, len(data), h.Get(hdrOffset), size)
	}
	if as.n == 0 { // the first chunk taken says what the payload is
		as.n, as.size, as.sum = n, size, sum
		as.chunks = map[int]piece{}
	}
	as.chunks[i] = piece{off: lo, data: bytes.Clone(data)}
	as.held += len(data)
	as.got++
	return nil
}

// verify puts the chunks of a done assembly together, in order, each
// starting where the one before ended, and checks the payload's size and
// checksum.
func (as *assembly) verify() error {
	if as.held != as.size {
		return fmt.Errorf("payload of %d bytes arrived as %d chunks of %d bytes in all", as.size, as.n, as.held)
	}
	buf := make([]byte, 0, as.size)
	for i := range as.n {
		p := as.chunks[i]
		if p.off != len(buf) {
			return fmt.Errorf("payload of %d bytes: chunk %d/%d starts at byte %d, chunk %d ended at byte %d", as.size, i, as.n, p.off, i-1, len(buf))
		}
		buf = append(buf, p.data...)
	}
	got := sha256.Sum256(buf)
	if hex.EncodeToString(got[:]) != as.sum {
		return fmt.Errorf("payload of %d bytes fails its checksum (sha256 %s, publisher recorded %s)", as.size, hex.EncodeToString(got[:]), as.sum)
	}
	as.buf, as.chunks = buf, nil
	return nil
}

// DropStep deletes every payload of step from the run's stream, once every
// agent has collected it; a run that never drops keeps its whole exchange on
// disk.
func (r *Run) DropStep(ctx context.Context, step int) error {
	err := r.within(ctx, fmt.Sprintf("drop step %d", step), func(ctx context.Context) error {
		return r.stream.Purge(ctx, jetstream.WithPurgeSubject(stepPrefix(r.id)+strconv.Itoa(step)+".>"))
	})
	if err != nil {
		return r.opErr(err, fmt.Sprintf("drop step %d", step))
	}
	return nil
}

// Steps lists the steps that have payloads on the stream, ascending.
func (r *Run) Steps(ctx context.Context) ([]int, error) {
	var info *jetstream.StreamInfo
	err := r.within(ctx, "list the steps on the stream", func(ctx context.Context) error {
		var err error
		info, err = r.stream.Info(ctx, jetstream.WithSubjectFilter(stepPrefix(r.id)+">"))
		return err
	})
	if err != nil {
		return nil, r.opErr(err, "list steps")
	}
	seen := map[int]bool{}
	for subj := range info.State.Subjects {
		rest := strings.TrimPrefix(subj, stepPrefix(r.id))
		s, _, _ := strings.Cut(rest, ".")
		if n, err := strconv.Atoi(s); err == nil {
			seen[n] = true
		}
	}
	steps := make([]int, 0, len(seen))
	for s := range seen {
		steps = append(steps, s)
	}
	slices.Sort(steps)
	return steps, nil
}
