package bus

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// DefaultMaxPayload is the largest message an embedded server accepts unless
// told otherwise: 8 MiB, the most NATS recommends. Payloads larger than a
// server's limit are split into chunks by Publish either way.
const DefaultMaxPayload = 8 << 20

// ServerOptions configure an embedded NATS server with JetStream.
type ServerOptions struct {
	// Dir is the JetStream store directory (file storage); required. A server
	// started again on the same directory finds everything stored before.
	Dir string
	// Listen is the client address, host:port. Empty means 127.0.0.1 on a free
	// port: reachable from this machine only. A non-loopback address requires
	// credentials in Auth.
	Listen string
	// InProcess starts no TCP listener at all: only Server.Connect reaches
	// the server (agents in this one process).
	InProcess bool
	// Name is the server's name; required and unique within a cluster.
	// Empty means a name derived from the listen address.
	Name string
	// MaxPayload is the largest message the server accepts, in bytes;
	// 0 means DefaultMaxPayload.
	MaxPayload int32
	// Auth, when set, refuses every client without the credentials.
	Auth Auth
	// TLS, when CertFile is set, makes clients speak TLS.
	TLS TLSFiles
	// Cluster, when Name is set, joins this server to a NATS cluster.
	Cluster ClusterOptions
}

// Auth is what a server asks of its clients: a shared token, or the public
// keys of NATS nkey users (a client proves it holds the seed). Zero means
// anyone who reaches the listener may connect.
type Auth struct {
	Token string
	// NKeys are user public keys ("U…"), as nk -gen user prints them.
	NKeys []string
}

func (a Auth) set() bool { return a.Token != "" || len(a.NKeys) > 0 }

// TLSFiles name PEM files, as the NATS server and clients take them.
type TLSFiles struct {
	// CertFile and KeyFile: this side's certificate and key (a server's, or a
	// client's when the server verifies clients).
	CertFile, KeyFile string
	// CAFile: certificates to verify the other side with. On a server,
	// setting it also requires clients to present certificates.
	CAFile string
}

// ClusterOptions join an embedded server to a NATS cluster (routes between
// servers). JetStream replicates a run's stream over the cluster's servers
// when the run is opened with Replicas > 1.
type ClusterOptions struct {
	// Name is the cluster's name, the same on every server; empty means no cluster.
	Name string
	// Listen is the route address, host:port; empty means 127.0.0.1 on a free port.
	Listen string
	// Routes are other servers' route URLs (nats-route://host:port); one
	// reachable server is enough, the rest are discovered.
	Routes []string
}

// Server is an embedded NATS server with file-backed JetStream.
type Server struct {
	ns   *server.Server
	opts ServerOptions
}

// StartServer starts an embedded server and waits until it accepts clients
// (bounded by ctx, and by 30 s when ctx has no deadline).
func StartServer(ctx context.Context, opts ServerOptions) (*Server, error) {
	so, err := serverOptions(opts)
	if err != nil {
		return nil, err
	}
	ns, err := server.NewServer(so)
	if err != nil {
		return nil, fmt.Errorf("bus: embedded server: %w", err)
	}
	ns.Start()
	s := &Server{ns: ns, opts: opts}
	if !ns.ReadyForConnections(waitFor(ctx, 30*time.Second)) {
		s.Close()
		return nil, fmt.Errorf("bus: embedded server (store %s) not ready: %w", opts.Dir, errNotReady(ctx))
	}
	return s, nil
}

func serverOptions(opts ServerOptions) (*server.Options, error) {
	if opts.Dir == "" {
		return nil, errors.New("bus: server options: Dir (the JetStream store directory) is required")
	}
	so := &server.Options{
		JetStream:  true,
		StoreDir:   opts.Dir,
		ServerName: opts.Name,
		NoLog:      true,
		NoSigs:     true,
		MaxPayload: opts.MaxPayload,
		DontListen: opts.InProcess,
	}
	if so.MaxPayload == 0 {
		so.MaxPayload = DefaultMaxPayload
	}
	if so.MaxPayload < 0 {
		return nil, fmt.Errorf("bus: server options: MaxPayload must be positive, got %d", opts.MaxPayload)
	}
	host, port, err := hostPort("Listen", opts.Listen)
	if err != nil {
		return nil, err
	}
	so.Host, so.Port = host, port
	if !opts.InProcess && !isLoopback(host) && !opts.Auth.set() {
		return nil, fmt.Errorf("bus: server options: Listen %q is reachable from other machines; set Auth (a token or nkeys)", opts.Listen)
	}
	if err := setAuth(so, opts.Auth); err != nil {
		return nil, err
	}
	if opts.TLS.CertFile != "" {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{
			CertFile: opts.TLS.CertFile, KeyFile: opts.TLS.KeyFile,
			CaFile: opts.TLS.CAFile, Verify: opts.TLS.CAFile != "",
		})
		if err != nil {
			return nil, fmt.Errorf("bus: server options: TLS: %w", err)
		}
		so.TLS, so.TLSConfig, so.TLSVerify = true, tc, opts.TLS.CAFile != ""
	}
	if opts.Cluster.Name != "" {
		if err := setCluster(so, opts.Cluster); err != nil {
			return nil, err
		}
	}
	if so.ServerName == "" {
		so.ServerName = fmt.Sprintf("hacrl-%s-%d", host, port)
	}
	return so, nil
}

func setAuth(so *server.Options, a Auth) error {
	if a.Token != "" && len(a.NKeys) > 0 {
		return errors.New("bus: server options: Auth: set Token or NKeys, not both")
	}
	so.Authorization = a.Token
	for i, k := range a.NKeys {
		if !nkeys.IsValidPublicUserKey(k) {
			return fmt.Errorf("bus: server options: Auth.NKeys[%d]: %q is not an nkey user public key (U…)", i, k)
		}
		so.Nkeys = append(so.Nkeys, &server.NkeyUser{Nkey: k})
	}
	return nil
}

func setCluster(so *server.Options, c ClusterOptions) error {
	host, port, err := hostPort("Cluster.Listen", c.Listen)
	if err != nil {
		return err
	}
	so.Cluster = server.ClusterOpts{Name: c.Name, Host: host, Port: port}
	for i, r := range c.Routes {
		u, err := url.Parse(r)
		if err != nil || u.Host == "" {
			return fmt.Errorf("bus: server options: Cluster.Routes[%d]: want nats-route://host:port, got %q", i, r)
		}
		so.Routes = append(so.Routes, u)
	}
	return nil
}

// hostPort splits host:port, defaulting to 127.0.0.1 and a free port (-1 for
// the NATS server).
func hostPort(field, addr string) (string, int, error) {
	if addr == "" {
		return "127.0.0.1", -1, nil
	}
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("bus: server options: %s: want host:port, got %q", field, addr)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bus: server options: %s: bad port in %q", field, addr)
	}
	if port == 0 {
		port = -1
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return host, port, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// URL is the address clients in other processes connect to
// (nats://127.0.0.1:PORT by default), or "" for an in-process server.
func (s *Server) URL() string {
	if s.opts.InProcess {
		return ""
	}
	return s.ns.ClientURL()
}

// ClusterURL is the route address other servers list in their
// ClusterOptions.Routes, or "" when the server is not clustered.
func (s *Server) ClusterURL() string {
	a := s.ns.ClusterAddr()
	if a == nil {
		return ""
	}
	return "nats-route://" + a.String()
}

// Connect opens a client connection inside this process (no TCP): how agents
// in the server's own process reach it. Credentials in opts are still checked.
func (s *Server) Connect(ctx context.Context, opts ClientOptions) (*Conn, error) {
	return connect(ctx, "", opts, s.ns)
}

// WaitJetStream waits until JetStream on this server can take requests: in a
// cluster, until the servers have elected a meta leader and this one has
// caught up with it.
func (s *Server) WaitJetStream(ctx context.Context) error {
	if !s.ns.JetStreamIsClustered() {
		return nil
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if s.ns.JetStreamIsCurrent() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bus: server %s: JetStream cluster not ready: %w", s.ns.Name(), ctx.Err())
		case <-tick.C:
		}
	}
}

// Close shuts the server down and waits until its files are closed. What was
// stored stays in Dir for the next server started on it.
func (s *Server) Close() {
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
}

// waitFor is how long to wait: ctx's remaining time, or def without a deadline.
func waitFor(ctx context.Context, def time.Duration) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return max(time.Until(d), time.Millisecond)
	}
	return def
}

func errNotReady(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.New("timed out")
}
