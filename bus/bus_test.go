package bus

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"
)

// testCtx bounds a test.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func startServer(t testing.TB, opts ServerOptions) *Server {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	s, err := StartServer(testCtx(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func dial(t testing.TB, url string, opts ClientOptions) *Conn {
	t.Helper()
	c, err := Connect(testCtx(t), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func openRun(t testing.TB, c *Conn, spec RunSpec) *Run {
	t.Helper()
	if spec.ID == "" {
		spec.ID = "r1"
	}
	if spec.ConfigHash == "" {
		spec.ConfigHash = "cfg-0"
	}
	r, err := c.OpenRun(testCtx(t), spec)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// rolloutsLike is n bytes shaped like a step's rollouts: int32 token ids and
// float32 log-probs, alternating, from a seeded source.
func rolloutsLike(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint32(b[i:], uint32(rng.IntN(152_000)))
		binary.LittleEndian.PutUint32(b[i+4:], math.Float32bits(-rng.Float32()*12))
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func agentNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("agent-%d", i)
	}
	return names
}

// streamMsgs is how many messages the run's stream holds.
func streamMsgs(t *testing.T, r *Run) uint64 {
	t.Helper()
	info, err := r.stream.Info(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func TestPublishCollect(t *testing.T) {
	tests := []struct {
		name       string
		agents     []string
		size       int
		maxPayload int32
		inProcess  bool
	}{
		{"2 agents, one chunk each, in process", agentNames(2), 10_000, 0, true},
		{"3 agents, chunked, loopback", agentNames(3), 200_000, 64 << 10, false},
		{"4 agents, chunked, in process", agentNames(4), 300_001, 64 << 10, true},
		{"empty payloads", agentNames(2), 0, 0, true},
		{"names that are no subject tokens", []string{"qwen2.5 0.5B", "llama/3.2*", "a>b", "ünï"}, 70_000, 64 << 10, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			srv := startServer(t, ServerOptions{MaxPayload: tt.maxPayload, InProcess: tt.inProcess})
			var c *Conn
			if tt.inProcess {
				var err error
				if c, err = srv.Connect(ctx, ClientOptions{}); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(c.Close)
			} else {
				c = dial(t, srv.URL(), ClientOptions{})
			}
			r := openRun(t, c, RunSpec{})
			want := map[string][]byte{}
			for i, a := range tt.agents {
				want[a] = rolloutsLike(uint64(i), tt.size+i)
			}
			for step := range 2 {
				for _, a := range tt.agents {
					p := append(want[a], byte(step))
					if err := r.Publish(ctx, step, a, p); err != nil {
						t.Fatal(err)
					}
				}
			}
			for step := range 2 {
				got, err := r.Collect(ctx, step, tt.agents, 10*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(tt.agents) {
					t.Fatalf("step %d: got %d payloads, want %d", step, len(got), len(tt.agents))
				}
				for _, a := range tt.agents {
					if w := append(want[a], byte(step)); !bytes.Equal(got[a], w) {
						t.Errorf("step %d agent %q: payload of %d bytes differs from the %d published", step, a, len(got[a]), len(w))
					}
				}
			}
			steps, err := r.Steps(ctx)
			if err != nil || fmt.Sprint(steps) != "[0 1]" {
				t.Fatalf("Steps = %v, %v; want [0 1]", steps, err)
			}
			if err := r.DropStep(ctx, 0); err != nil {
				t.Fatal(err)
			}
			if steps, _ := r.Steps(ctx); fmt.Sprint(steps) != "[1]" {
				t.Fatalf("after DropStep(0), Steps = %v; want [1]", steps)
			}
		})
	}
}

// Collect waits for a payload published after it started.
func TestCollectWaitsForLatePublisher(t *testing.T) {
	ctx := testCtx(t)
	srv := startServer(t, ServerOptions{MaxPayload: 64 << 10})
	r := openRun(t, dial(t, srv.URL(), ClientOptions{}), RunSpec{})
	late := rolloutsLike(7, 150_000)
	if err := r.Publish(ctx, 3, "early", []byte("e")); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		r.Publish(ctx, 3, "late", late)
	}()
	got, err := r.Collect(ctx, 3, []string{"early", "late"}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got["late"], late) || string(got["early"]) != "e" {
		t.Fatalf("got %d and %d bytes", len(got["early"]), len(got["late"]))
	}
}

func TestDuplicatePublishDropped(t *testing.T) {
	tests := []struct {
		name   string
		window time.Duration // the server's dedupe window
		pause  time.Duration // between the two publishes
		// wantExtra: whether the second publish's chunks are stored (beyond
		// the window); Collect must drop them either way.
		wantExtra bool
	}{
		{"within the server's window", 0, 0, false},
		{"after the window: dropped on read", 200 * time.Millisecond, 600 * time.Millisecond, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			srv := startServer(t, ServerOptions{MaxPayload: 64 << 10, InProcess: true})
			c, err := srv.Connect(ctx, ClientOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			r := openRun(t, c, RunSpec{DedupeWindow: tt.window})
			p := rolloutsLike(1, 150_000) // 3 chunks
			if err := r.Publish(ctx, 0, "a", p); err != nil {
				t.Fatal(err)
			}
			if err := r.Publish(ctx, 0, "b", []byte("b")); err != nil {
				t.Fatal(err)
			}
			before := streamMsgs(t, r)
			if before != 4 {
				t.Fatalf("stream holds %d messages after publishing 3 + 1 chunks", before)
			}
			time.Sleep(tt.pause)
			if err := r.Publish(ctx, 0, "a", p); err != nil {
				t.Fatal(err)
			}
			after := streamMsgs(t, r)
			if tt.wantExtra != (after > before) {
				t.Fatalf("stream went from %d to %d messages on re-publish; want growth %v", before, after, tt.wantExtra)
			}
			got, err := r.Collect(ctx, 0, []string{"a", "b"}, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got["a"], p) || string(got["b"]) != "b" {
				t.Fatal("collected payloads differ from the published ones")
			}
		})
	}
}

// A publisher that crashed midway left some chunks; the run waits for it,
// names it, and once it publishes again everything is there once.
func TestCrashedPublisherRepublishes(t *testing.T) {
	ctx := testCtx(t)
	srv := startServer(t, ServerOptions{MaxPayload: 64 << 10})
	r := openRun(t, dial(t, srv.URL(), ClientOptions{}), RunSpec{})
	p := rolloutsLike(3, 200_000) // 4 chunks
	if err := r.Publish(ctx, 5, "ok", []byte("fine")); err != nil {
		t.Fatal(err)
	}
	if err := r.publish(ctx, 5, "crashy", p, func(i int) bool { return i == 0 || i == 2 }); err != nil {
		t.Fatal(err)
	}
	_, err := r.Collect(ctx, 5, []string{"ok", "crashy", "absent"}, 300*time.Millisecond)
	var miss *MissingError
	if !errors.As(err, &miss) {
		t.Fatalf("Collect error = %v, want a *MissingError", err)
	}
	msg := err.Error()
	for _, want := range []string{`step 5`, `"crashy" (2 of 4 chunks)`, `"absent"`, "waited 3"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %s", msg, want)
		}
	}
	if strings.Contains(msg, `"ok"`) {
		t.Errorf("error %q names an agent whose payload is there", msg)
	}
	if miss.Waited < 300*time.Millisecond || miss.Waited > 5*time.Second {
		t.Errorf("waited %v for a 300ms timeout", miss.Waited)
	}
	if err := r.Publish(ctx, 5, "crashy", p); err != nil {
		t.Fatal(err)
	}
	if n := streamMsgs(t, r); n != 5 {
		t.Errorf("stream holds %d messages, want 1 + 4 (re-published chunks dropped)", n)
	}
	got, err := r.Collect(ctx, 5, []string{"ok", "crashy"}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got["crashy"], p) {
		t.Fatal("re-published payload differs")
	}
}

func TestLargePayload(t *testing.T) {
	const size = 8 << 20 // token ids and log-probs of ~1M tokens
	for _, mp := range []int32{0, 1 << 20} {
		t.Run(fmt.Sprintf("max payload %d", mp), func(t *testing.T) {
			ctx := testCtx(t)
			srv := startServer(t, ServerOptions{MaxPayload: mp})
			r := openRun(t, dial(t, srv.URL(), ClientOptions{}), RunSpec{})
			p := rolloutsLike(11, size)
			if err := r.Publish(ctx, 0, "big", p); err != nil {
				t.Fatal(err)
			}
			wantChunks := uint64((size + r.chunk - 1) / r.chunk)
			if n := streamMsgs(t, r); n != wantChunks || n < 2 {
				t.Errorf("stream holds %d messages, want %d chunks", n, wantChunks)
			}
			got, err := r.Collect(ctx, 0, []string{"big"}, 20*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got["big"], p) {
				t.Fatal("8 MB payload differs after the round trip")
			}
		})
	}
}

// A chunk altered after publishing fails the checksum.
func TestCorruptChunkRefused(t *testing.T) {
	ctx := testCtx(t)
	srv := startServer(t, ServerOptions{MaxPayload: 64 << 10, InProcess: true})
	c, err := srv.Connect(ctx, ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := openRun(t, c, RunSpec{})
	p := rolloutsLike(5, 100_000)
	// Chunk 1 first, from altered bytes under the good payload's checksum:
	// it is the copy Collect keeps.
	bad := bytes.Clone(p)
	bad[r.chunk+10] ^= 1
	n := (len(p) + r.chunk - 1) / r.chunk
	if _, err := c.js.PublishMsg(ctx, r.chunkMsg(0, "a", bad, sha256.Sum256(p), 1, n)); err != nil {
		t.Fatal(err)
	}
	if err := r.Publish(ctx, 0, "a", p); err != nil {
		t.Fatal(err)
	}
	_, err = r.Collect(ctx, 0, []string{"a"}, 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "fails its checksum") {
		t.Fatalf("Collect error = %v, want a checksum failure", err)
	}
}

func TestConfigMismatchRefused(t *testing.T) {
	first := RunSpec{ID: "run-7", ConfigHash: "sha256:aaaa", CodeVersion: "v1.2.0"}
	tests := []struct {
		name  string
		spec  RunSpec
		wants []string // in the error; none means accepted
	}{
		{"same", first, nil},
		{"other config", RunSpec{ID: "run-7", ConfigHash: "sha256:bbbb", CodeVersion: "v1.2.0"},
			[]string{"run run-7 refuses", `config hash differs (run: "sha256:aaaa", this process: "sha256:bbbb")`}},
		{"other code", RunSpec{ID: "run-7", ConfigHash: "sha256:aaaa", CodeVersion: "v1.3.0"},
			[]string{`code version differs (run: "v1.2.0", this process: "v1.3.0")`}},
		{"both", RunSpec{ID: "run-7", ConfigHash: "x", CodeVersion: ""},
			[]string{"config hash differs", "code version differs"}},
		{"another run is another identity", RunSpec{ID: "run-8", ConfigHash: "x"}, nil},
	}
	srv := startServer(t, ServerOptions{})
	openRun(t, dial(t, srv.URL(), ClientOptions{}), first)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, srv.URL(), ClientOptions{})
			_, err := c.OpenRun(testCtx(t), tt.spec)
			if tt.wants == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var mm *MismatchError
			if !errors.As(err, &mm) {
				t.Fatalf("OpenRun error = %v, want a *MismatchError", err)
			}
			for _, w := range tt.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %s", err, w)
				}
			}
		})
	}
}

func TestBadRunSpec(t *testing.T) {
	srv := startServer(t, ServerOptions{InProcess: true})
	c, err := srv.Connect(testCtx(t), ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tt := range []struct {
		spec RunSpec
		want string
	}{
		{RunSpec{ID: "a.b", ConfigHash: "h"}, `run id "a.b"`},
		{RunSpec{ID: "", ConfigHash: "h"}, `run id ""`},
		{RunSpec{ID: "ok"}, "ConfigHash is required"},
		{RunSpec{ID: "ok", ConfigHash: "h", DedupeWindow: -time.Second}, "DedupeWindow must be positive"},
	} {
		if _, err := c.OpenRun(testCtx(t), tt.spec); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("OpenRun(%+v) error = %v, want %q", tt.spec, err, tt.want)
		}
	}
}

func TestAuth(t *testing.T) {
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := user.PublicKey()
	seed, _ := user.Seed()
	other, _ := nkeys.CreateUser()
	otherSeed, _ := other.Seed()
	dir := t.TempDir()
	seedFile := filepath.Join(dir, "user.nk")
	otherFile := filepath.Join(dir, "other.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(otherFile, otherSeed, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		auth   Auth
		client ClientOptions
		ok     bool
	}{
		{"token: none", Auth{Token: "s3cret"}, ClientOptions{}, false},
		{"token: wrong", Auth{Token: "s3cret"}, ClientOptions{Token: "guess"}, false},
		{"token: right", Auth{Token: "s3cret"}, ClientOptions{Token: "s3cret"}, true},
		{"nkeys: none", Auth{NKeys: []string{pub}}, ClientOptions{}, false},
		{"nkeys: other seed", Auth{NKeys: []string{pub}}, ClientOptions{NKeySeedFile: otherFile}, false},
		{"nkeys: right seed", Auth{NKeys: []string{pub}}, ClientOptions{NKeySeedFile: seedFile}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startServer(t, ServerOptions{Auth: tt.auth})
			vias := []string{"loopback", "in process"}
			if !tt.ok {
				// In process, a refused client's pipe holds the server's
				// goroutine until its 10 s write deadline: refusals are
				// tested where they matter, on the listener.
				vias = vias[:1]
			}
			for _, via := range vias {
				var c *Conn
				var err error
				if via == "loopback" {
					c, err = Connect(testCtx(t), srv.URL(), tt.client)
				} else {
					c, err = srv.Connect(testCtx(t), tt.client)
				}
				if tt.ok {
					if err != nil {
						t.Fatalf("%s: %v", via, err)
					}
					openRun(t, c, RunSpec{})
					c.Close()
					continue
				}
				if err == nil {
					c.Close()
					t.Fatalf("%s: a client with %+v connected", via, tt.client)
				}
				if !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
					t.Errorf("%s: error %q does not say authorization violation", via, err)
				}
			}
		})
	}
}

func TestServerOptionsRefused(t *testing.T) {
	for _, tt := range []struct {
		opts ServerOptions
		want string
	}{
		{ServerOptions{}, "Dir"},
		{ServerOptions{Dir: "d", Listen: "0.0.0.0:0"}, "reachable from other machines; set Auth"},
		{ServerOptions{Dir: "d", Listen: ":4222"}, "reachable from other machines"},
		{ServerOptions{Dir: "d", Listen: "nohost"}, "want host:port"},
		{ServerOptions{Dir: "d", Auth: Auth{NKeys: []string{"SUAbad"}}}, "Auth.NKeys[0]"},
		{ServerOptions{Dir: "d", Auth: Auth{Token: "t", NKeys: []string{"U"}}}, "not both"},
		{ServerOptions{Dir: "d", Cluster: ClusterOptions{Name: "c", Routes: []string{"::"}}}, "Cluster.Routes[0]"},
	} {
		if _, err := StartServer(testCtx(t), tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("StartServer(%+v) error = %v, want %q", tt.opts, err, tt.want)
		}
	}
}

// A server stopped mid-run and started again on the same store directory
// and address has everything published before; the client reconnects.
func TestServerRestartKeepsData(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	srv, err := StartServer(ctx, ServerOptions{Dir: dir, MaxPayload: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(srv.URL(), "nats://")
	c := dial(t, srv.URL(), ClientOptions{})
	r := openRun(t, c, RunSpec{ConfigHash: "h1"})
	agents := agentNames(3)
	want := map[string][]byte{}
	for i, a := range agents {
		want[a] = rolloutsLike(uint64(20+i), 100_000+i)
		if err := r.Publish(ctx, 4, a, want[a]); err != nil {
			t.Fatal(err)
		}
		if err := r.Heartbeat(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	srv.Close()
	// A publish while the server is down goes through once it is back.
	late := rolloutsLike(30, 150_000)
	published := make(chan error, 1)
	go func() { published <- r.Publish(ctx, 5, "agent-0", late) }()
	time.Sleep(200 * time.Millisecond)

	srv2 := startServer(t, ServerOptions{Dir: dir, Listen: addr, MaxPayload: 64 << 10})
	got, err := r.Collect(ctx, 4, agents, 20*time.Second) // the same client, reconnected
	if err != nil {
		t.Fatal(err)
	}
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	got5, err := r.Collect(ctx, 5, agents[:1], 20*time.Second)
	if err != nil || !bytes.Equal(got5["agent-0"], late) {
		t.Fatalf("payload published while the server was down: %v", err)
	}
	for _, a := range agents {
		if !bytes.Equal(got[a], want[a]) {
			t.Errorf("agent %s: payload differs after the restart", a)
		}
	}
	alive, err := r.Agents(ctx)
	if err != nil || len(alive) != 3 {
		t.Fatalf("Agents after restart = %v, %v; want 3", alive, err)
	}
	c2 := dial(t, srv2.URL(), ClientOptions{})
	if _, err := c2.OpenRun(ctx, RunSpec{ID: "r1", ConfigHash: "h2"}); err == nil {
		t.Fatal("the run's identity was lost in the restart: another config hash joined")
	}
}

func TestHeartbeats(t *testing.T) {
	ctx := testCtx(t)
	r := inProcessRun(t)
	before := time.Now().Add(-time.Second)
	if err := r.Heartbeat(ctx, "b.x"); err != nil {
		t.Fatal(err)
	}
	kctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.KeepAlive(kctx, "a", 20*time.Millisecond) }()
	var first []Agent
	var err error
	for len(first) < 2 { // until KeepAlive's first beat
		time.Sleep(20 * time.Millisecond)
		if first, err = r.Agents(ctx); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	agents, err := r.Agents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(agents) != 2 || agents[0].Name != "a" || agents[1].Name != "b.x" {
		t.Fatalf("Agents = %+v, want a and b.x", agents)
	}
	for _, a := range agents {
		if a.LastSeen.Before(before) || a.LastSeen.After(time.Now().Add(time.Second)) {
			t.Errorf("agent %s last seen %v, not now", a.Name, a.LastSeen)
		}
	}
	if !agents[0].LastSeen.After(first[0].LastSeen) {
		t.Errorf("KeepAlive did not beat again: last seen %v, then %v", first[0].LastSeen, agents[0].LastSeen)
	}
	if agents[1].LastSeen != first[1].LastSeen {
		t.Errorf("agent b.x beat once but its last-seen time moved")
	}
}

func TestToken(t *testing.T) {
	seen := map[string]string{}
	for _, name := range []string{"a", "A", "a-b_c", "a.b", "a b", "a*", "a>", "a/b", "a=2E", "ü", ""} {
		tok := token(name)
		if strings.ContainsAny(tok, ". *>/\t") {
			t.Errorf("token(%q) = %q, not a subject token", name, tok)
		}
		if prev, dup := seen[tok]; dup {
			t.Errorf("token(%q) = token(%q) = %q", name, prev, tok)
		}
		seen[tok] = name
	}
}

// inProcessRun opens a run on a new in-process server.
func inProcessRun(t *testing.T) *Run {
	t.Helper()
	srv := startServer(t, ServerOptions{InProcess: true})
	c, err := srv.Connect(testCtx(t), ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return openRun(t, c, RunSpec{})
}

// Need and Needed: the earliest step any agent needs is known only once
// every agent has said, and an agent's later Need replaces its earlier one.
func TestNeeded(t *testing.T) {
	ctx := testCtx(t)
	r := inProcessRun(t)
	agents := []string{"a", "b.x"}
	steps := []struct {
		agent      string
		from, want int
		ok         bool
	}{
		{"a", 5, 0, false},
		{"b.x", 3, 3, true},
		{"b.x", 9, 5, true},
		{"a", 12, 9, true},
	}
	for _, s := range steps {
		if err := r.Need(ctx, s.agent, s.from); err != nil {
			t.Fatal(err)
		}
		got, ok, err := r.Needed(ctx, agents)
		if err != nil || ok != s.ok || (ok && got != s.want) {
			t.Fatalf("after %s needs %d: Needed = %d, %v, %v; want %d, %v", s.agent, s.from, got, ok, err, s.want, s.ok)
		}
	}
	if _, ok, _ := r.Needed(ctx, nil); ok {
		t.Error("Needed of no agents says ok")
	}
	if _, ok, err := r.Finished(ctx, "a"); ok || err != nil {
		t.Fatalf("Finished before Finish: %v, %v", ok, err)
	}
	if err := r.Finish(ctx, "a", 7); err != nil {
		t.Fatal(err)
	}
	if n, ok, err := r.Finished(ctx, "a"); n != 7 || !ok || err != nil {
		t.Fatalf("Finished = %d, %v, %v; want 7, true", n, ok, err)
	}
}

// Agents lists every agent that beat, however many, once each, by name:
// from the bucket stream's subjects, which a repeated beat does not add to.
func TestAgentsListsEveryAgent(t *testing.T) {
	ctx := testCtx(t)
	r := inProcessRun(t)
	var want []string
	for i := range 40 {
		name := fmt.Sprintf("agent-%02d", i)
		want = append(want, name)
		for range 2 {
			if err := r.Heartbeat(ctx, name); err != nil {
				t.Fatal(err)
			}
		}
	}
	agents, err := r.Agents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range agents {
		got = append(got, a.Name)
	}
	if !slices.Equal(got, want) {
		t.Errorf("Agents = %v, want %v", got, want)
	}
}
