package serve

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/tokenizer"
)

// DefaultAddr is where hacrl serve listens unless told otherwise: loopback.
const DefaultAddr = "127.0.0.1:8000"

// Config is what a Server serves and its bounds. Model, Tok and Template
// are required; a zero bound takes its default.
type Config struct {
	Model    *model.Model        // float32, on the native engine (it decodes in a model.Batch)
	Tok      tokenizer.Tokenizer // the model's tokenizer
	Template tokenizer.Template  // the chat template, ready to render (LoadChat done for hf)
	// Sampling holds the defaults: MaxNewTokens is a request's max_tokens
	// when it gives none, Stop the tokens every response ends at (the
	// template's stop tokens, unless ignore_eos), Vocab the tokenizer's
	// size (ids at or above it are never sampled). The other fields are not
	// read: requests choose their own sampling (OpenAI's defaults:
	// temperature 1, top_p 1).
	Sampling model.SampleOptions
	// Name is the model id of /v1/models and of every response; requests
	// naming another model get 404. Default "hacrl".
	Name string
	// APIKey, when set, is required on every route as
	// "Authorization: Bearer <key>".
	APIKey string
	// WeightVersion is the version of the initial weights (default "0").
	WeightVersion string
	// MaxBatch is the most sequences decoded at once (the batch's rows);
	// default: as many as a 4 GiB key/value cache holds, 1 to 64.
	MaxBatch int
	// MaxContext is the most positions of one sequence, prompt and new
	// tokens (the batch's slots); default the model's, at most 2048.
	MaxContext int
	// MaxConcurrent is the most generation requests in flight (decoding
	// or waiting for a row); more get 429. Default 4·MaxBatch.
	MaxConcurrent int
	// MaxN bounds n, and the choices of one request (prompts × n).
	// Default 16.
	MaxN int
	// MaxBodyBytes bounds a request body; larger ones get 413. Default 4 MiB.
	MaxBodyBytes int64
	// Load reads the checkpoint directory of POST
	// /update_weights_from_disk; nil refuses updates.
	Load func(ctx context.Context, dir string) (*model.Model, error)
	// Logf logs what goes wrong inside the server (panics, failed steps);
	// default the standard logger.
	Logf func(format string, args ...any)
	// ShutdownTimeout bounds how long Serve, once its context is done,
	// lets the requests in flight finish; past it they are cut (see
	// Serve). Default 30 s.
	ShutdownTimeout time.Duration

	hooks       func(*scheduler) // tests: sets the scheduler's hooks before it starts
	bodyTimeout time.Duration    // how long a request's body may take to arrive (tests shorten it)
	sendTimeout time.Duration    // how long one write of a response may block (tests shorten it)
}

// defaultBodyTimeout is how long a request's body may take to arrive
// after its header: a client that stalls mid-body gets 408.
const defaultBodyTimeout = 30 * time.Second

// defaultSendTimeout is how long one write of a response may block: a
// client that stops reading (without closing) loses its request, which
// frees its slot, instead of holding it forever.
const defaultSendTimeout = 30 * time.Second

// DefaultShutdownTimeout is how long a stopping server lets the requests
// in flight finish unless Config.ShutdownTimeout says otherwise.
const DefaultShutdownTimeout = 30 * time.Second

// cutGrace is how long the handlers of requests cut at the shutdown bound
// get to write their ending (an error, or an error event and [DONE])
// before their connections are closed.
const cutGrace = 2 * time.Second

// maxLogProbs is the most top log-probs a request can ask per token.
const maxLogProbs = 20

// withDefaults fills cfg's zero bounds and checks it.
func (cfg Config) withDefaults() (Config, error) {
	switch {
	case cfg.Model == nil:
		return cfg, errors.New("serve: Config.Model is nil")
	case cfg.Tok == nil:
		return cfg, errors.New("serve: Config.Tok is nil")
	case cfg.MaxBatch < 0, cfg.MaxContext < 0, cfg.MaxConcurrent < 0, cfg.MaxN < 0, cfg.MaxBodyBytes < 0, cfg.ShutdownTimeout < 0:
		return cfg, errors.New("serve: negative bound in Config")
	}
	mc := cfg.Model.Config()
	if cfg.Name == "" {
		cfg.Name = "hacrl"
	}
	if cfg.WeightVersion == "" {
		cfg.WeightVersion = "0"
	}
	if cfg.MaxContext == 0 {
		cfg.MaxContext = min(mc.MaxSeq, 2048)
	}
	if cfg.MaxContext > mc.MaxSeq {
		return cfg, fmt.Errorf("serve: MaxContext %d is more than the model's %d positions", cfg.MaxContext, mc.MaxSeq)
	}
	if cfg.MaxBatch == 0 {
		perRow := 2 * mc.Layers * mc.KVHeads * mc.HeadDim() * cfg.MaxContext * 4
		cfg.MaxBatch = min(64, max(1, (4<<30)/max(perRow, 1)))
	}
	if cfg.MaxConcurrent == 0 {
		cfg.MaxConcurrent = 4 * cfg.MaxBatch
	}
	if cfg.MaxN == 0 {
		cfg.MaxN = 16
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = 4 << 20
	}
	if cfg.Sampling.MaxNewTokens <= 0 {
		cfg.Sampling.MaxNewTokens = 256
	}
	if v := cfg.Sampling.Vocab; v <= 0 || v > mc.Vocab {
		cfg.Sampling.Vocab = min(cfg.Tok.VocabSize(), mc.Vocab)
	}
	if cfg.bodyTimeout == 0 {
		cfg.bodyTimeout = defaultBodyTimeout
	}
	if cfg.sendTimeout == 0 {
		cfg.sendTimeout = defaultSendTimeout
	}
	if cfg.Logf == nil {
		cfg.Logf = log.Printf
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	return cfg, nil
}

// Server is an OpenAI-compatible HTTP server of one model: Handler serves
// the routes, one scheduler goroutine decodes every request's sequences in
// one continuous batch. Close stops it.
type Server struct {
	cfg     Config
	sched   *scheduler
	slots   chan struct{} // generation requests in flight
	handler http.Handler
	swapMu  sync.Mutex // one weight update at a time
	cut     atomic.Int64
}

// New starts a server of cfg's model: its scheduler runs until Close.
func New(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	sched, err := newScheduler(cfg.Model, cfg.WeightVersion, cfg.MaxBatch, cfg.MaxContext, cfg.Logf)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, sched: sched, slots: make(chan struct{}, cfg.MaxConcurrent)}
	s.handler = s.routes()
	if cfg.hooks != nil {
		cfg.hooks(sched)
	}
	sched.start()
	return s, nil
}

// Config returns the server's configuration with its defaults filled in.
func (s *Server) Config() Config { return s.cfg }

// Handler returns the server's HTTP handler: every route, with the API key
// check, the body bound and panic recovery.
func (s *Server) Handler() http.Handler { return s.handler }

// Stats returns the scheduler's counts and the requests in flight.
func (s *Server) Stats() Stats {
	st := s.sched.snapshot()
	st.InFlight = len(s.slots)
	return st
}

// WeightVersion is the version of the weights new requests sample with.
func (s *Server) WeightVersion() string { return s.sched.current.Load().version }

// Serve serves HTTP on l until ctx is done, then shuts down: it stops
// accepting (the listener closes, idle connections and connections that
// have not sent a byte yet are closed at once), lets the requests in
// flight finish, streams included, and returns as soon as none is left.
// Those still running after Config.ShutdownTimeout are cut: the
// scheduler stops, so a request still waiting or decoding gets a 503 in
// OpenAI's error shape, a stream that has begun an error event and
// [DONE]; a connection whose handler has not ended cutGrace later (a
// body still arriving, a client that stopped reading) is closed. After a
// cut the server serves no more; Close is still to be called.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	var fresh sync.Map // net.Conn → struct{}: connections that have not sent a request yet
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: log.New(logWriter{s.cfg.Logf}, "", 0),
		ConnState: func(c net.Conn, st http.ConnState) {
			if st == http.StateNew {
				fresh.Store(c, struct{}{})
			} else {
				fresh.Delete(c)
			}
		}}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// http.Server.Shutdown waits up to 5 s for a connection that has not
	// sent a byte yet (a client's pre-opened one): no request is lost by
	// closing it, since the listener is closed first.
	shut := make(chan error, 1)
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	go func() { shut <- srv.Shutdown(sctx) }()
	go func() {
		for t := time.Millisecond; ; t = min(2*t, 100*time.Millisecond) {
			fresh.Range(func(c, _ any) bool {
				c.(net.Conn).Close()
				fresh.Delete(c)
				return true
			})
			select {
			case <-sctx.Done():
				return
			case <-time.After(t):
			}
		}
	}()
	err := <-shut
	if errors.Is(err, context.DeadlineExceeded) {
		n := len(s.slots)
		s.sched.stop()
		gctx, gcancel := context.WithTimeout(context.Background(), cutGrace)
		defer gcancel()
		if err = srv.Shutdown(gctx); errors.Is(err, context.DeadlineExceeded) {
			err = srv.Close()
		}
		s.cut.Add(int64(n))
	}
	<-errc
	return err
}

// Cut is how many generation requests Serve cut at its shutdown bound.
func (s *Server) Cut() int { return int(s.cut.Load()) }

// Close stops the scheduler: requests still decoding fail with "the server
// is shutting down". Call it after Serve returned.
func (s *Server) Close() error {
	s.sched.stop()
	return nil
}

// UpdateWeights makes m the model new requests sample with, under version:
// admission pauses, the sequences in the batch finish on the old weights,
// the batch is rebuilt on m and admission resumes; no request is dropped.
// m must have the architecture of the served model. It returns how many
// requests finished on the old weights while admission waited.
func (s *Server) UpdateWeights(ctx context.Context, m *model.Model, version string) (int, error) {
	s.swapMu.Lock()
	defer s.swapMu.Unlock()
	cur := s.sched.current.Load()
	if a, b := cur.model.Config().Normalized(), m.Config().Normalized(); !reflect.DeepEqual(a, b) {
		return 0, fmt.Errorf("the new weights' architecture differs from the served model's: %s", configDiff(a, b))
	}
	if version == "" {
		version = nextVersion(cur.version)
	}
	return s.sched.swap(ctx, m, version)
}

// nextVersion is the version after v: v+1 when it is an integer, else v.
func nextVersion(v string) string {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return strconv.FormatInt(n+1, 10)
	}
	return v
}

// configDiff names the fields where a and b differ.
func configDiff(a, b model.Config) string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var diffs []string
	for i := range va.NumField() {
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			diffs = append(diffs, fmt.Sprintf("%s %v, served %v", va.Type().Field(i).Name, vb.Field(i).Interface(), va.Field(i).Interface()))
		}
	}
	return strings.Join(diffs, "; ")
}

// logWriter sends the http.Server's own log lines to Config.Logf.
type logWriter struct{ logf func(string, ...any) }

func (w logWriter) Write(p []byte) (int, error) {
	w.logf("%s", strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// routes builds the handler: authentication, then the route, each handler
// guarded against panics.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	route := func(path, method string, h func(http.ResponseWriter, *http.Request) error) {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
				w.Header().Set("Allow", method)
				writeError(w, &apiError{Status: http.StatusMethodNotAllowed, Message: fmt.Sprintf("%s %s: use %s", r.Method, path, method), Type: "invalid_request_error"})
				return
			}
			if err := h(w, r); err != nil {
				writeError(w, asAPIError(err))
			}
		})
	}
	route("/v1/completions", http.MethodPost, s.completions)
	route("/v1/chat/completions", http.MethodPost, s.chatCompletions)
	route("/v1/models", http.MethodGet, s.models)
	route("/v1/models/{id}", http.MethodGet, s.modelByID)
	route("/health", http.MethodGet, s.health)
	route("/get_weight_version", http.MethodGet, s.getWeightVersion)
	route("/update_weights_from_disk", http.MethodPost, s.updateWeightsFromDisk)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{Status: http.StatusNotFound, Message: fmt.Sprintf("no route %s %s", r.Method, r.URL.Path), Type: "invalid_request_error", Code: "not_found"})
	})
	return s.recoverPanics(s.authenticate(mux))
}

// authenticate requires the API key, when there is one, on every route.
func (s *Server) authenticate(next http.Handler) http.Handler {
	if s.cfg.APIKey == "" {
		return next
	}
	want := []byte("Bearer " + s.cfg.APIKey)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			msg := "invalid API key: send Authorization: Bearer <key>"
			if len(got) == 0 {
				msg = "missing API key: send Authorization: Bearer <key>"
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="hacrl"`)
			writeError(w, &apiError{Status: http.StatusUnauthorized, Message: msg, Type: "invalid_request_error", Code: "invalid_api_key"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// recoverPanics turns a handler's panic into a 500 (when nothing was
// written yet) and a log line; the server goes on. Each write of the
// response may block for at most Config.sendTimeout.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw := &recordingWriter{ResponseWriter: w, timeout: s.cfg.sendTimeout}
		// No deadline until the response is written (a kept-alive
		// connection keeps its last request's).
		http.NewResponseController(w).SetWriteDeadline(time.Time{}) //nolint:errcheck // not every writer has one
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.cfg.Logf("serve: panic in %s %s: %v", r.Method, r.URL.Path, v)
			if !rw.wrote {
				writeError(w, &apiError{Status: http.StatusInternalServerError, Message: "internal error", Type: "server_error"})
			}
		}()
		next.ServeHTTP(rw, r)
	})
}

// recordingWriter notes whether a response has started, and bounds how
// long each write may block.
type recordingWriter struct {
	http.ResponseWriter
	wrote   bool
	timeout time.Duration
}

func (w *recordingWriter) WriteHeader(code int) { w.wrote = true; w.ResponseWriter.WriteHeader(code) }
func (w *recordingWriter) Write(p []byte) (int, error) {
	w.wrote = true
	w.deadline()
	return w.ResponseWriter.Write(p)
}
func (w *recordingWriter) Flush() {
	w.wrote = true
	w.deadline()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// FlushError is Flush with its error, for http.ResponseController.
func (w *recordingWriter) FlushError() error {
	w.wrote = true
	w.deadline()
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// deadline gives the next write timeout to complete.
func (w *recordingWriter) deadline() {
	http.NewResponseController(w.ResponseWriter).SetWriteDeadline(time.Now().Add(w.timeout)) //nolint:errcheck // not every writer has one
}

// Unwrap lets http.ResponseController reach the connection.
func (w *recordingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// acquire takes a generation slot, or says 429.
func (s *Server) acquire() (release func(), err error) {
	select {
	case s.slots <- struct{}{}:
		return func() { <-s.slots }, nil
	default:
		return nil, &apiError{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Code: "rate_limit_exceeded",
			Message: fmt.Sprintf("the server is at its bound of %d concurrent requests; retry later", s.cfg.MaxConcurrent)}
	}
}

// envAPIKey is the environment variable hacrl serve reads the API key
// from when --api-key is not given.
const envAPIKey = "HACRL_API_KEY"

// APIKeyFromEnv returns $HACRL_API_KEY.
func APIKeyFromEnv() string { return os.Getenv(envAPIKey) }
