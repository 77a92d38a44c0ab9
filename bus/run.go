package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DefaultDedupeWindow is how long the server remembers message ids to drop a
// re-published chunk; Collect also drops duplicates outside it.
const DefaultDedupeWindow = 24 * time.Hour

// RunSpec names a run and what every process joining it must agree on.
type RunSpec struct {
	// ID names the run: letters, digits, '_' and '-', at most 64.
	ID string
	// ConfigHash identifies the run's config; required. A process opening
	// the run with another hash is refused.
	ConfigHash string
	// CodeVersion identifies the build (a version or commit); a process with
	// another one is refused. Empty is a value like any other.
	CodeVersion string
	// Config, optional, is the run's config as its first process recorded
	// it (JSON, say): a refused process gets the recorded one in its
	// *MismatchError, to say what differs.
	Config []byte
	// Replicas is how many servers keep the run's stream and buckets: 1 for
	// one server, 3 for a three-node cluster. 0 means 1.
	Replicas int
	// DedupeWindow is how long the server drops re-published message ids;
	// 0 means DefaultDedupeWindow.
	DedupeWindow time.Duration
}

var runID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Run is a handle on one run's state on the bus: its identity and agent
// liveness in a key-value bucket, and its step exchange in a stream.
type Run struct {
	id     string
	conn   *Conn
	stream jetstream.Stream
	kv     jetstream.KeyValue
	chunk  int
}

// Identity is what every process of one run must share.
type Identity struct {
	ConfigHash  string `json:"config_hash"`
	CodeVersion string `json:"code_version"`
}

// Key-value keys of a run's bucket.
const (
	keyIdentity = "identity"
	keyConfig   = "config" // the first process's RunSpec.Config
	keyAlive    = "alive." // + agent token
	keyNeed     = "need."  // + agent token: the first step the agent may still collect
	keyDone     = "done."  // + agent token: the steps the agent has finished the run with
)

// OpenRun opens a run: it creates the run's stream and bucket where they do
// not exist yet, records the run's config hash and code version on first
// open, and refuses (with a *MismatchError) a spec that differs from the
// recorded ones.
func (c *Conn) OpenRun(ctx context.Context, spec RunSpec) (*Run, error) {
	if !runID.MatchString(spec.ID) {
		return nil, fmt.Errorf("bus: run id %q: want 1 to 64 letters, digits, '_' or '-'", spec.ID)
	}
	if spec.ConfigHash == "" {
		return nil, fmt.Errorf("bus: run %s: ConfigHash is required", spec.ID)
	}
	replicas := max(spec.Replicas, 1)
	window := spec.DedupeWindow
	if window == 0 {
		window = DefaultDedupeWindow
	}
	if window < 0 {
		return nil, fmt.Errorf("bus: run %s: DedupeWindow must be positive, got %v", spec.ID, window)
	}
	var stream jetstream.Stream
	err := c.within(ctx, spec.ID, "create the run's step stream", func(ctx context.Context) error {
		var err error
		stream, err = c.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name:        streamName(spec.ID),
			Description: "hacrl run " + spec.ID + ": step exchange",
			Subjects:    []string{stepPrefix(spec.ID) + ">"},
			Storage:     jetstream.FileStorage,
			Replicas:    replicas,
			Duplicates:  window,
			Retention:   jetstream.LimitsPolicy,
		})
		return err
	})
	if err != nil {
		return nil, opErr(spec.ID, err, "step stream")
	}
	var kv jetstream.KeyValue
	err = c.within(ctx, spec.ID, "create the run's key-value bucket", func(ctx context.Context) error {
		var err error
		kv, err = c.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      "hacrl_" + spec.ID,
			Description: "hacrl run " + spec.ID + ": identity and agent liveness",
			Storage:     jetstream.FileStorage,
			Replicas:    replicas,
		})
		return err
	})
	if err != nil {
		return nil, opErr(spec.ID, err, "key-value bucket")
	}
	r := &Run{id: spec.ID, conn: c, stream: stream, kv: kv}
	r.chunk = chunkSize(c.MaxPayload())
	if err := r.checkIdentity(ctx, Identity{spec.ConfigHash, spec.CodeVersion}, spec.Config); err != nil {
		return nil, err
	}
	return r, nil
}

// within runs op bounded by the connection's wait (Conn.within).
func (r *Run) within(ctx context.Context, what string, op func(ctx context.Context) error) error {
	return r.conn.within(ctx, r.id, what, op)
}

// opErr says what failed, unless err already does (a *WaitError).
func (r *Run) opErr(err error, what string) error { return opErr(r.id, err, what) }

func opErr(run string, err error, what string) error {
	var we *WaitError
	if errors.As(err, &we) {
		return err
	}
	return fmt.Errorf("bus: run %s: %s: %w", run, what, err)
}

// kvCreate creates key with value, bounded by the connection's wait; a key
// that exists is jetstream.ErrKeyExists (also when a try whose answer was
// lost created it: the caller compares the value).
func (r *Run) kvCreate(ctx context.Context, key string, value []byte, what string) error {
	err := r.within(ctx, what, func(ctx context.Context) error {
		_, err := r.kv.Create(ctx, key, value)
		return err
	})
	if err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return r.opErr(err, what)
	}
	return err
}

// kvGet reads key, bounded by the connection's wait; a missing key is
// jetstream.ErrKeyNotFound.
func (r *Run) kvGet(ctx context.Context, key, what string) (jetstream.KeyValueEntry, error) {
	var e jetstream.KeyValueEntry
	err := r.within(ctx, what, func(ctx context.Context) error {
		var err error
		e, err = r.kv.Get(ctx, key)
		return err
	})
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, r.opErr(err, what)
	}
	return e, err
}

// kvPut puts value under key, bounded by the connection's wait.
func (r *Run) kvPut(ctx context.Context, key string, value []byte, what string) error {
	err := r.within(ctx, what, func(ctx context.Context) error {
		_, err := r.kv.Put(ctx, key, value)
		return err
	})
	if err != nil {
		return r.opErr(err, what)
	}
	return nil
}

func (r *Run) checkIdentity(ctx context.Context, mine Identity, config []byte) error {
	b, err := json.Marshal(mine)
	if err != nil {
		return err
	}
	if config != nil {
		// Before the identity, so that a process refused by the identity
		// finds the config beside it.
		if err := r.kvCreate(ctx, keyConfig, config, "record the run's config"); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			return err
		}
	}
	if err := r.kvCreate(ctx, keyIdentity, b, "record the run's identity"); err == nil {
		return nil
	} else if !errors.Is(err, jetstream.ErrKeyExists) {
		return err
	}
	e, err := r.kvGet(ctx, keyIdentity, "read the run's identity")
	if err != nil {
		return err
	}
	var theirs Identity
	if err := json.Unmarshal(e.Value(), &theirs); err != nil {
		return fmt.Errorf("bus: run %s: identity on the bus is not JSON: %w", r.id, err)
	}
	if theirs != mine {
		e := &MismatchError{Run: r.id, Recorded: theirs, Joining: mine}
		if c, err := r.kvGet(ctx, keyConfig, "read the run's config"); err == nil {
			e.RecordedConfig = c.Value()
		}
		return e
	}
	return nil
}

// MismatchError refuses a process whose config hash or code version differs
// from the run's.
type MismatchError struct {
	Run      string
	Recorded Identity // what the run's first process recorded
	Joining  Identity // what this process brought
	// RecordedConfig is the config the run's first process recorded
	// (RunSpec.Config), nil when none.
	RecordedConfig []byte
}

func (e *MismatchError) Error() string {
	var diffs []string
	if e.Recorded.ConfigHash != e.Joining.ConfigHash {
		diffs = append(diffs, fmt.Sprintf("config hash differs (run: %q, this process: %q)", e.Recorded.ConfigHash, e.Joining.ConfigHash))
	}
	if e.Recorded.CodeVersion != e.Joining.CodeVersion {
		diffs = append(diffs, fmt.Sprintf("code version differs (run: %q, this process: %q)", e.Recorded.CodeVersion, e.Joining.CodeVersion))
	}
	return fmt.Sprintf("bus: run %s refuses this process: %s", e.Run, strings.Join(diffs, "; "))
}

// ID is the run's id.
func (r *Run) ID() string { return r.id }

// Heartbeat records that agent is alive now (the server's clock).
func (r *Run) Heartbeat(ctx context.Context, agent string) error {
	if err := checkAgent(agent); err != nil {
		return err
	}
	return r.kvPut(ctx, keyAlive+token(agent), []byte(agent), fmt.Sprintf("record the heartbeat of agent %q", agent))
}

// KeepAlive beats for agent every interval until ctx is done, and returns
// nil then; or the first heartbeat error. Run it in its own goroutine.
func (r *Run) KeepAlive(ctx context.Context, agent string, every time.Duration) error {
	if every <= 0 {
		return fmt.Errorf("bus: run %s: heartbeat interval must be positive, got %v", r.id, every)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := r.Heartbeat(ctx, agent); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Agent is an agent's liveness as the bus saw it.
type Agent struct {
	Name     string
	LastSeen time.Time // the server's time of the agent's last heartbeat
}

// Agents lists every agent that ever beat in this run, by name.
//
// The keys come from the bucket stream's subjects (its info, filtered to
// the heartbeat keys), not from a key-value watcher: nats.go's key lister
// ends its listing after the first key when it cannot read the consumer's
// initial pending count, which under load gave a partial list without an
// error.
func (r *Run) Agents(ctx context.Context) ([]Agent, error) {
	var keys []string
	prefix := "$KV." + r.kv.Bucket() + "."
	err := r.within(ctx, "list the agents", func(ctx context.Context) error {
		st, err := r.conn.js.Stream(ctx, "KV_"+r.kv.Bucket())
		if err != nil {
			return err
		}
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(prefix+keyAlive+">"))
		if err != nil {
			return err
		}
		keys = keys[:0]
		for subj := range info.State.Subjects {
			keys = append(keys, strings.TrimPrefix(subj, prefix))
		}
		return nil
	})
	if err != nil {
		return nil, r.opErr(err, "list agents")
	}
	var out []Agent
	for _, k := range keys {
		e, err := r.kvGet(ctx, k, "read "+k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, Agent{Name: string(e.Value()), LastSeen: e.Created()})
	}
	slices.SortFunc(out, func(a, b Agent) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Need records that agent will collect no step before from again (it
// resumes from a checkpoint at or after it), so that those steps may be
// dropped once every agent says so.
func (r *Run) Need(ctx context.Context, agent string, from int) error {
	if err := checkAgent(agent); err != nil {
		return err
	}
	return r.putCount(ctx, keyNeed, agent, from, "the first step it needs")
}

// Needed returns the earliest step any of agents still needs, as they
// recorded with Need; ok is false when one of them has recorded nothing
// yet (then every step may still be needed).
func (r *Run) Needed(ctx context.Context, agents []string) (step int, ok bool, err error) {
	step = math.MaxInt
	for _, a := range agents {
		n, ok, err := r.count(ctx, keyNeed, a, "the first step it needs")
		if err != nil || !ok {
			return 0, false, err
		}
		step = min(step, n)
	}
	return step, len(agents) > 0, nil
}

// Finish records that agent has ended the run after steps steps.
func (r *Run) Finish(ctx context.Context, agent string, steps int) error {
	if err := checkAgent(agent); err != nil {
		return err
	}
	return r.putCount(ctx, keyDone, agent, steps, "the steps it finished with")
}

// Finished returns the steps agent said it ended the run with (Finish);
// ok is false when it has not said.
func (r *Run) Finished(ctx context.Context, agent string) (steps int, ok bool, err error) {
	return r.count(ctx, keyDone, agent, "the steps it finished with")
}

// putCount records n, what it means for agent, under prefix + agent's token.
func (r *Run) putCount(ctx context.Context, prefix, agent string, n int, what string) error {
	return r.kvPut(ctx, prefix+token(agent), []byte(strconv.Itoa(n)), fmt.Sprintf("record %s of agent %q", what, agent))
}

// count reads what putCount recorded for agent under prefix; ok is false
// when nothing is.
func (r *Run) count(ctx context.Context, prefix, agent, what string) (n int, ok bool, err error) {
	e, err := r.kvGet(ctx, prefix+token(agent), fmt.Sprintf("read %s of agent %q", what, agent))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if n, err = strconv.Atoi(string(e.Value())); err != nil {
		return 0, false, fmt.Errorf("bus: run %s: %s of agent %q is %q, not a number", r.id, what, agent, e.Value())
	}
	return n, true, nil
}

func streamName(run string) string { return "HACRL_" + run }

func stepPrefix(run string) string { return "hacrl." + run + ".step." }

func checkAgent(agent string) error {
	if agent == "" {
		return errors.New("bus: empty agent name")
	}
	return nil
}

// token encodes any agent name as a NATS subject token and key-value key:
// letters, digits, '_' and '-' stay, every other byte becomes =XX.
func token(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "=%02X", c)
		}
	}
	return b.String()
}
