package bus

import (
	"context"
	"fmt"
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
}

// ackTimeout is how long a published chunk waits for the server's
// acknowledgement before it is sent again.
const ackTimeout = 10 * time.Second

// Conn is a client connection with JetStream.
type Conn struct {
	nc *nats.Conn
	js jetstream.JetStream
}

// Connect connects to a NATS server or cluster with JetStream: url is
// nats://host:port, or several such URLs separated by commas. The client
// reconnects on its own when a server restarts; ctx bounds the first
// connection and the JetStream check.
func Connect(ctx context.Context, url string, opts ClientOptions) (*Conn, error) {
	if url == "" {
		return nil, fmt.Errorf("bus: connect: empty server URL")
	}
	return connect(ctx, url, opts, nil)
}

func connect(ctx context.Context, url string, opts ClientOptions, inProc nats.InProcessConnProvider) (*Conn, error) {
	where := url
	if inProc != nil {
		where = "in-process server"
	}
	no, err := clientOptions(opts)
	if err != nil {
		return nil, fmt.Errorf("bus: connect to %s: %w", where, err)
	}
	no = append(no, nats.Timeout(waitFor(ctx, 10*time.Second)))
	if inProc != nil {
		no = append(no, nats.InProcessServer(inProc))
	}
	nc, err := nats.Connect(url, no...)
	if err != nil {
		return nil, fmt.Errorf("bus: connect to %s: %w", where, err)
	}
	// An acknowledgement lost with a dying connection fails after
	// ackTimeout, and Publish sends the chunk again (its message id makes
	// that harmless).
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(ackTimeout))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("bus: connect to %s: %w", where, err)
	}
	if _, err := js.AccountInfo(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("bus: connect to %s: JetStream not available: %w", where, err)
	}
	return &Conn{nc: nc, js: js}, nil
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
