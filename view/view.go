// Package view serves a local web view of training runs: live curves of
// every agent's metrics and each logged step's rollouts side by side, read
// from the runs' output directories while they are written (hacrl view).
//
//	srv, err := view.New(view.Config{Runs: []string{"runs/arith-hacpo"}})
//	if err != nil { … }
//	l, err := net.Listen("tcp", view.DefaultAddr)
//	if err != nil { … }
//	err = srv.Serve(ctx, l) // until ctx is done
//
// A run directory (OUT) is what hacrl train writes: metrics.jsonl (package
// metrics), the rollout logs OUT/rollouts/step-NNNNNNNN.jsonl.gz (package
// rollout), the resolved OUT/config.yaml and, once the run has ended,
// OUT/final. An experiment's archived cell (metrics.jsonl.gz, cell.yaml,
// done.json) is a run directory too. The view only reads: it writes
// nothing, and has no route that changes anything.
//
// # The API
//
// Every answer is JSON; the page is at / and its files under /assets/,
// embedded in the binary (nothing is fetched from elsewhere).
//
//   - GET /api/runs: {"runs": [{"id", "dir", "name", "agents", "method",
//     "steps", "last_step", "done"}]}, one per directory given to New, with
//     ids "0", "1", … in that order. name is the config's name or the
//     directory's base name; agents and method come from the config (agents
//     from the metrics when there is none); last_step is the largest step of
//     metrics.jsonl; done is true once OUT/final holds every agent or
//     OUT/done.json exists.
//   - GET /api/metrics?run=ID&offset=N[&gen=G]: {"offset": M, "gen": G,
//     "reset": false, "records": [{"step", "agent", "time", "values"}]}: the
//     records of metrics.jsonl from byte offset N (0: the start) up to its
//     last complete line, at most Config.MaxChunk bytes of them (the whole
//     lines of a chunk); M is where the next call starts, and M equal to N
//     means there is nothing new. A value the file holds as null (NaN, ±Inf)
//     is null. A last line without its newline (a record being written, or
//     torn by a crash) is left for a later call.
//   - GET /api/rollouts?run=ID: {"steps": [1, 2, …]}, the logged steps.
//   - GET /api/rollouts/STEP?run=ID: {"step": STEP, "records": […]}, the
//     step's rollout.Records as the log holds them, in its order.
//   - GET /api/events: a text/event-stream. "event: metrics" with data
//     {"run": ID} when the run's metrics.jsonl has new complete lines, or
//     {"run": ID, "reset": true} when it was rewritten; "event: rollouts"
//     with {"run": ID, "step": S} when the log of step S appeared, or
//     {"run": ID, "reset": true} when logs were removed (a resumed run
//     prunes those after its checkpoint). A comment line every
//     Config.KeepAlive keeps the connection open. Each run's files are
//     checked every Config.Poll; a client that does not read its events is
//     dropped (its stream ends) rather than let it hold the others back.
//   - Errors: {"error": "…"} with status 400 (an unknown run id, an offset
//     that is not the start of a line or lies beyond the file, a step that
//     is not logged), 404 (no such route), 405 (any method but GET and
//     HEAD) or 500 (a file that cannot be read, naming it).
//
// # Rewritten metrics
//
// A run resumed from a checkpoint rewrites metrics.jsonl without the records
// after the checkpoint (metrics.Open), and a run started again with
// --overwrite starts it anew: offsets into the old file mean nothing in the
// new one. The view notices (a new file, or a smaller one), counts the
// rewrite in gen, and answers a request that is about the old file — whose
// gen differs, or whose offset lies beyond the new file but within what
// the old one had, or inside a line of a file rewritten since the view
// started — with "reset": true and the records from offset 0: the client
// drops what it had and goes on from the new offset.
//
// # Security
//
// The view binds to loopback (DefaultAddr) unless told otherwise. On any
// other address a key is required (Serve refuses to start without one),
// and with a key every route needs it: the header "Authorization: Bearer
// KEY", or the cookie hacrl_view_key (HttpOnly, SameSite=Strict), which the
// page's first load as /?key=KEY sets before redirecting to / (so that the
// key leaves the address bar). An EventSource cannot send headers; it
// carries the cookie. Keys are compared in constant time. Without a key
// the view answers only requests addressed to localhost, 127.0.0.1 or
// [::1], so that a web page elsewhere cannot reach it by pointing a domain
// name at 127.0.0.1 (DNS rebinding). Pages are served with a
// Content-Security-Policy that allows scripts, styles, images and
// connections from the view itself only (inline styles aside), and never
// in a frame.
//
// # Cost
//
// Nothing reads a whole metrics file per request: /api/metrics reads from
// the requested offset, a chunk at a time, and each run's poller reads
// only the bytes appended since its last look (for last_step), 4 MiB at a
// time. Lines as metrics.Writer writes them are copied into the answer
// without being decoded (any other line goes through metrics.ParseLine).
// An archived metrics.jsonl.gz is decompressed once and held in memory. A
// rollout log is decompressed once and kept while its size and
// modification time stay the same (the last few logs read).
package view

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// DefaultAddr is where hacrl view listens unless told otherwise: loopback.
const DefaultAddr = "127.0.0.1:8080"

// KeyEnv is the environment variable that holds the key when no --key is given.
const KeyEnv = "HACRL_VIEW_KEY"

// CookieName is the cookie that carries the key after the page's first load.
const CookieName = "hacrl_view_key"

// Defaults of Config's zero fields.
const (
	DefaultPoll         = 300 * time.Millisecond
	DefaultKeepAlive    = 15 * time.Second
	DefaultMaxChunk     = 4 << 20
	DefaultClientBuffer = 64
)

// ErrNeedKey is Serve's and CheckAddr's error for an address that is not
// loopback without a key.
var ErrNeedKey = errors.New("a key is required to serve on an address that is not loopback")

//go:embed assets
var assets embed.FS

// Config configures a Server.
type Config struct {
	// Runs are the run directories, served as ids "0", "1", … in this order.
	Runs []string
	// Key, when set, is required on every route (see "Security").
	Key string
	// Poll is how often each run's files are checked (DefaultPoll).
	Poll time.Duration
	// KeepAlive is how long an idle event stream waits before it sends a
	// comment line (DefaultKeepAlive).
	KeepAlive time.Duration
	// MaxChunk is the most bytes of metrics.jsonl one /api/metrics answer
	// covers (DefaultMaxChunk); a longer line is sent whole.
	MaxChunk int
	// ClientBuffer is how many events wait for an event stream's client
	// before the client is dropped (DefaultClientBuffer).
	ClientBuffer int
}

// Server serves the view of a set of runs. Its Handler answers requests;
// Watch (which Serve runs) checks the runs' files and feeds the event
// streams.
type Server struct {
	cfg     Config
	runs    []*run
	hub     *hub
	logs    *logCache
	keyHash [sha256.Size]byte
	handler http.Handler
}

// New checks the run directories and returns a Server for them. A directory
// that does not exist, or holds none of metrics.jsonl, metrics.jsonl.gz,
// config.yaml and cell.yaml, is an error naming it; a run that has written
// no metrics yet is not (its records appear when it writes them).
func New(cfg Config) (*Server, error) {
	if len(cfg.Runs) == 0 {
		return nil, errors.New("view: no run directory given")
	}
	if err := checkKey(cfg.Key); err != nil {
		return nil, err
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = DefaultKeepAlive
	}
	if cfg.MaxChunk <= 0 {
		cfg.MaxChunk = DefaultMaxChunk
	}
	if cfg.ClientBuffer <= 0 {
		cfg.ClientBuffer = DefaultClientBuffer
	}
	s := &Server{cfg: cfg, hub: newHub(cfg.ClientBuffer), logs: newLogCache(8)}
	for i, dir := range cfg.Runs {
		r, err := openRun(fmt.Sprint(i), dir)
		if err != nil {
			return nil, err
		}
		s.runs = append(s.runs, r)
	}
	s.keyHash = hashKey(cfg.Key)
	s.handler = s.routes()
	return s, nil
}

// checkKey refuses a key the cookie cannot carry unchanged.
func checkKey(key string) error {
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c <= ' ' || c >= 0x7f || c == '"' || c == ',' || c == ';' || c == '\\' {
			return fmt.Errorf("view: the key has %q at byte %d: want printable ASCII without spaces, quotes, commas, semicolons or backslashes (it travels in a cookie)", c, i)
		}
	}
	return nil
}

// CheckAddr reports whether a server may listen on addr (host:port) with
// key: any address with a key, and without one only a loopback host
// (localhost, 127.0.0.0/8, ::1). The error wraps ErrNeedKey.
func CheckAddr(addr, key string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("view: address %q: want host:port: %w", addr, err)
	}
	if key == "" && !IsLoopback(host) {
		what := fmt.Sprintf("host %q", host)
		if host == "" {
			what = "no host (every interface)"
		}
		return fmt.Errorf("view: address %s has %s: %w (--key KEY or $%s)", addr, what, ErrNeedKey, KeyEnv)
	}
	return nil
}

// IsLoopback reports whether host (a name or an IP, without port) is
// loopback: "localhost", 127.0.0.0/8 or ::1.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	return ip != nil && ip.IsLoopback()
}

// Handler returns the server's HTTP handler. The event stream sends events
// only while Watch runs.
func (s *Server) Handler() http.Handler { return s.handler }

// Watch checks every run's files each Config.Poll and sends what changed to
// the event streams, until ctx is done; then it ends every event stream
// and returns. Call it once.
func (s *Server) Watch(ctx context.Context) {
	var wg sync.WaitGroup
	for _, r := range s.runs {
		wg.Go(func() {
			t := time.NewTicker(s.cfg.Poll)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					s.refresh(r)
				}
			}
		})
	}
	wg.Wait()
	s.hub.close()
}

// refresh checks r's files and publishes what changed. A file it cannot
// read is left to the request that reads it, which names it in its error.
func (s *Server) refresh(r *run) {
	evs, _ := r.check()
	for _, ev := range evs {
		s.hub.publish(ev)
	}
}

// Serve serves the view on l until ctx is done, then stops: no new
// connections, the event streams end, the requests in flight get a few
// seconds to finish. It returns nil after a stop for ctx, else the error
// that stopped it. A listener that is not on loopback needs Config.Key.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	if err := CheckAddr(l.Addr().String(), s.cfg.Key); err != nil {
		return err
	}
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		s.Watch(wctx)
	}()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	select {
	case err := <-served:
		stop()
		<-watched
		return fmt.Errorf("view: %w", err)
	case <-ctx.Done():
	}
	stop()
	<-watched // the event streams have ended
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	<-served
	if err != nil {
		return fmt.Errorf("view: shutdown: %w", err)
	}
	return nil
}

// contentSecurity lets the page load scripts, styles, images and data from
// the view only, and never in a frame.
const contentSecurity = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// routes builds the handler: the API, the page and its assets, behind guard.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/api/runs", s.handleRuns)
	mux.HandleFunc("/api/metrics", s.handleMetrics)
	mux.HandleFunc("/api/rollouts", s.handleRolloutSteps)
	mux.HandleFunc("/api/rollouts/{step}", s.handleRollouts)
	mux.HandleFunc("/api/events", s.handleEvents)
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no route %s (the API has /api/runs, /api/metrics, /api/rollouts, /api/rollouts/STEP and /api/events)", r.URL.Path)
	})
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded directory is there: go:embed checked it
	}
	mux.Handle("/assets/", http.StripPrefix("/assets/", http.FileServerFS(sub)))
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		page, err := fs.ReadFile(sub, "index.html")
		if err != nil {
			writeError(w, http.StatusInternalServerError, "the page is missing from this build: %v", err)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		w.Write(page)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no page %s", r.URL.Path)
	})
	return s.guard(mux)
}

// guard applies the security rules (see "Security") before next.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Content-Security-Policy", contentSecurity)
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, "method %s: the view is read-only (GET and HEAD only)", r.Method)
			return
		}
		if s.cfg.Key == "" {
			host, _, err := net.SplitHostPort(r.Host)
			if err != nil {
				host = r.Host
			}
			if !IsLoopback(host) {
				writeError(w, http.StatusForbidden, "host %q: without a key the view answers only requests to localhost, 127.0.0.1 or [::1]", r.Host)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		if s.keyMatches(bearer(r)) || s.keyMatches(cookieKey(r)) {
			next.ServeHTTP(w, r)
			return
		}
		if q := r.URL.Query(); r.URL.Path == "/" && q.Has("key") && s.keyMatches(q.Get("key")) {
			http.SetCookie(w, &http.Cookie{Name: CookieName, Value: s.cfg.Key, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
		h.Set("WWW-Authenticate", `Bearer realm="hacrl view"`)
		msg := "missing key: send Authorization: Bearer KEY, or open /?key=KEY once"
		if bearer(r) != "" || cookieKey(r) != "" || r.URL.Query().Has("key") {
			msg = "wrong key: send Authorization: Bearer KEY, or open /?key=KEY once"
		}
		writeError(w, http.StatusUnauthorized, "%s", msg)
	})
}

// keyMatches compares got with the key in constant time (of the key's
// hash, so that not even the key's length shows).
func (s *Server) keyMatches(got string) bool {
	if got == "" {
		return false
	}
	h := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(h[:], s.keyHash[:]) == 1
}

func hashKey(key string) [sha256.Size]byte { return sha256.Sum256([]byte(key)) }

func bearer(r *http.Request) string {
	v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return ""
	}
	return v
}

func cookieKey(r *http.Request) string {
	c, err := r.Cookie(CookieName)
	if err != nil {
		return ""
	}
	return c.Value
}

// writeJSON writes v as the response.
func writeJSON(w http.ResponseWriter, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encoding the answer: %v", err)
		return
	}
	writeBody(w, data)
}

// writeBody writes a JSON body that is already encoded.
func writeBody(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(body)
}

// writeError writes {"error": …} with status.
func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	data, _ := json.Marshal(map[string]string{"error": fmt.Sprintf(format, args...)})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(data, '\n'))
}

// statErr says whether err is a missing file.
func missing(err error) bool { return errors.Is(err, os.ErrNotExist) }
