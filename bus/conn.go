package bus

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ClientOptions are a client's credentials and TLS settings, as a NATS
// server asks for them. Set at most one of Token, NKeySeedFile and CredsFile.
type ClientOptions struct {
	// Name shows in the server's connection list (e.g. "hacrl agent qwen").
	Name string
	// Token is a shared secret (servers started with Auth.Token).
	Token string
	// NKeySeedFile holds an nkey user seed (servers with Auth.NKeys).
	NKeySeedFile string
	// CredsFile is a NATS credentials file (JWT + seed), for servers run in
	// operator mode (an external cluster, nsc/nats CLI managed).
	CredsFile string
	// TLS: CAFile to verify the server; CertFile and KeyFile when the server
	// verifies clients. Setting any of them requires TLS.
	TLS TLSFiles
	// Wait bounds every wait of this connection's calls for the server:
	// connecting, opening a run, publishing, heartbeats and the run's
	// records (Collect has its own timeout). A call the server has not
	// answered when it ends — unreachable, cut off, restarting for longer —
	// fails with a *WaitError. 0 means DefaultWait.
	Wait time.Duration
}

// DefaultWait is ClientOptions.Wait when none is given.
const DefaultWait = time.Minute

// tryTimeout bounds one try of a request within a wait: a request lost with
// a dying connection is made again after this long, not at the wait's end.
const tryTimeout = 10 * time.Second

// ackTimeout is how long a published chunk waits for the server's
// acknowledgement before it is sent again.
const ackTimeout = 10 * time.Second

// Conn is a client connection with JetStream.
type Conn struct {
	nc    *nats.Conn
	js    jetstream.JetStream
	where string        // the server's URL(s), for errors
	wait  time.Duration // ClientOptions.Wait
}

// Connect connects to a NATS server or cluster with JetStream: url is
// nats://host:port, or several such URLs separated by commas. A server not
// reachable yet is tried again until opts.Wait ends (then the error is a
// *WaitError); a refusal (credentials, TLS) fails at once. The client
// reconnects on its own when a server restarts.
func Connect(ctx context.Context, url string, opts ClientOptions) (*Conn, error) {
	if url == "" {
		return nil, fmt.Errorf("bus: connect: empty server URL")
	}
	return connect(ctx, url, opts, nil)
}

func connect(ctx context.Context, url string, opts ClientOptions, inProc nats.InProcessConnProvider) (*Conn, error) {
	c := &Conn{where: url, wait: opts.Wait}
	if inProc != nil {
		c.where = "in-process server"
	}
	if c.wait < 0 {
		return nil, fmt.Errorf("bus: connect to %s: Wait must be positive, got %v", c.where, c.wait)
	}
	if c.wait == 0 {
		c.wait = DefaultWait
	}
	no, err := clientOptions(opts)
	if err != nil {
		return nil, fmt.Errorf("bus: connect to %s: %w", c.where, err)
	}
	if inProc != nil {
		no = append(no, nats.InProcessServer(inProc))
	}
	err = c.within(ctx, "", "connect", func(ctx context.Context) error {
		nc, err := nats.Connect(url, append(no, nats.Timeout(waitFor(ctx, tryTimeout)))...)
		if err != nil {
			return err
		}
		c.nc = nc
		return nil
	})
	if err != nil {
		return nil, c.connectErr(err, "")
	}
	// An acknowledgement lost with a dying connection fails after
	// ackTimeout, and Publish sends the chunk again (its message id makes
	// that harmless).
	if c.js, err = jetstream.New(c.nc, jetstream.WithPublishAsyncTimeout(ackTimeout)); err != nil {
		c.nc.Close()
		return nil, fmt.Errorf("bus: connect to %s: %w", c.where, err)
	}
	err = c.within(ctx, "", "check that JetStream is available", func(ctx context.Context) error {
		_, err := c.js.AccountInfo(ctx)
		return err
	})
	if err != nil {
		c.nc.Close()
		return nil, c.connectErr(err, "JetStream not available: ")
	}
	return c, nil
}

// connectErr says where a connection failed, unless err already does (a
// *WaitError).
func (c *Conn) connectErr(err error, what string) error {
	var we *WaitError
	if errors.As(err, &we) {
		return err
	}
	return fmt.Errorf("bus: connect to %s: %s%w", c.where, what, err)
}

// WaitError is a wait on the bus that ended without an answer: the server
// unreachable, cut off or down for longer than the connection's Wait.
type WaitError struct {
	Run    string // the run, "" before one is opened
	Server string // the server's URL(s)
	What   string // what the call waited to do: "publish step 3 of agent \"a\""
	Waited time.Duration
	Last   error // the last error met on the way, if any
}

func (e *WaitError) Error() string {
	msg := "bus: "
	if e.Run != "" {
		msg += "run " + e.Run + ": "
	}
	msg += fmt.Sprintf("waited %v for the bus at %s to %s", e.Waited.Round(time.Millisecond), e.Server, e.What)
	if e.Last != nil && !errors.Is(e.Last, context.DeadlineExceeded) {
		msg += " (last error: " + e.Last.Error() + ")"
	}
	return msg
}

func (e *WaitError) Unwrap() error { return e.Last }

// within runs op until it succeeds, fails for good, or the connection's
// wait ends, which makes the error a *WaitError saying what op waited to
// do. Each try gets at most tryTimeout; a try that failed for a transient
// reason (no answer, a server not reachable or restarting) is made again
// after a pause, so op must be idempotent. When ctx ends it returns ctx's
// error, and other errors as op returned them.
func (c *Conn) within(ctx context.Context, run, what string, op func(ctx context.Context) error) error {
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, c.wait)
	defer cancel()
	for {
		tctx, tcancel := context.WithTimeout(wctx, tryTimeout)
		err := op(tctx)
		tcancel()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case wctx.Err() != nil:
			return &WaitError{Run: run, Server: c.where, What: what, Waited: time.Since(start), Last: err}
		case !transient(err):
			return err
		}
		pause(wctx, err)
	}
}

// transient says whether err may pass when the same request is made again:
// no answer in time, no server reachable, JetStream not ready yet.
func transient(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoServers) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, nats.ErrDisconnected) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) || errors.As(err, &ne)
}

func clientOptions(o ClientOptions) ([]nats.Option, error) {
	no := []nats.Option{
		nats.MaxReconnects(-1),
		nats.ReconnectWait(100 * time.Millisecond),
	}
	if o.Name != "" {
		no = append(no, nats.Name(o.Name))
	}
	n := 0
	for _, s := range []string{o.Token, o.NKeySeedFile, o.CredsFile} {
		if s != "" {
			n++
		}
	}
	if n > 1 {
		return nil, fmt.Errorf("set one of Token, NKeySeedFile and CredsFile, not %d", n)
	}
	switch {
	case o.Token != "":
		no = append(no, nats.Token(o.Token))
	case o.NKeySeedFile != "":
		opt, err := nats.NkeyOptionFromSeed(o.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("nkey seed %s: %w", o.NKeySeedFile, err)
		}
		no = append(no, opt)
	case o.CredsFile != "":
		no = append(no, nats.UserCredentials(o.CredsFile))
	}
	if o.TLS.CAFile != "" {
		no = append(no, nats.RootCAs(o.TLS.CAFile))
	}
	if o.TLS.CertFile != "" || o.TLS.KeyFile != "" {
		no = append(no, nats.ClientCert(o.TLS.CertFile, o.TLS.KeyFile))
	}
	if o.TLS != (TLSFiles{}) {
		no = append(no, nats.Secure())
	}
	return no, nil
}

// MaxPayload is the largest message the connected server accepts.
func (c *Conn) MaxPayload() int64 { return c.nc.MaxPayload() }

// Close closes the connection.
func (c *Conn) Close() { c.nc.Close() }
