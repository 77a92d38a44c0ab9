package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The waits' bounds. Every call that waits for the server gives up when the
// connection's Wait ends, with a *WaitError saying what it waited to do,
// for how long, and on which server. (Before the bound, Publish sent a chunk
// ten times, ten seconds each, whatever the wait.)

// margin is what a bounded call may take beyond its wait: the pause between
// tries and a loaded machine's scheduling.
const margin = 1500 * time.Millisecond

// TestCallsGiveUpWithinWait: with the server gone, each call of a run gives
// up within the connection's wait, naming what it waited for.
func TestCallsGiveUpWithinWait(t *testing.T) {
	ctx := testCtx(t)
	const wait = 700 * time.Millisecond
	srv, err := StartServer(ctx, ServerOptions{Dir: t.TempDir(), MaxPayload: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	url := srv.URL()
	c := dial(t, url, ClientOptions{Wait: wait})
	r := openRun(t, c, RunSpec{})
	if err := r.Publish(ctx, 1, "a", []byte("stored before")); err != nil {
		t.Fatal(err)
	}
	srv.Close()

	calls := []struct {
		name string
		what string // in the error: what the call waited to do
		call func(ctx context.Context) error
	}{
		{"Publish", `publish step 2 of agent "a" (3 of 3 chunks not stored`, func(ctx context.Context) error {
			return r.Publish(ctx, 2, "a", rolloutsLike(1, 150_000))
		}},
		{"Heartbeat", `record the heartbeat of agent "a"`, func(ctx context.Context) error { return r.Heartbeat(ctx, "a") }},
		{"KeepAlive", `record the heartbeat of agent "a"`, func(ctx context.Context) error { return r.KeepAlive(ctx, "a", time.Hour) }},
		{"Need", `record the first step it needs of agent "a"`, func(ctx context.Context) error { return r.Need(ctx, "a", 1) }},
		{"Needed", `read the first step it needs of agent "a"`, func(ctx context.Context) error {
			_, _, err := r.Needed(ctx, []string{"a"})
			return err
		}},
		{"Finish", `record the steps it finished with of agent "a"`, func(ctx context.Context) error { return r.Finish(ctx, "a", 4) }},
		{"Finished", `read the steps it finished with of agent "a"`, func(ctx context.Context) error {
			_, _, err := r.Finished(ctx, "a")
			return err
		}},
		{"Steps", "list the steps on the stream", func(ctx context.Context) error {
			_, err := r.Steps(ctx)
			return err
		}},
		{"DropStep", "drop step 1", func(ctx context.Context) error { return r.DropStep(ctx, 1) }},
		{"Agents", "list the agents", func(ctx context.Context) error {
			_, err := r.Agents(ctx)
			return err
		}},
		{"OpenRun", "create the run's step stream", func(ctx context.Context) error {
			_, err := c.OpenRun(ctx, RunSpec{ID: "r2", ConfigHash: "h"})
			return err
		}},
	}
	// All at once: each waits on its own.
	var wg sync.WaitGroup
	for _, tt := range calls {
		wg.Go(func() {
			start := time.Now()
			err := tt.call(ctx)
			took := time.Since(start)
			var we *WaitError
			if !errors.As(err, &we) {
				t.Errorf("%s with the server gone: %v (%T) after %v; want a *WaitError", tt.name, err, err, took)
				return
			}
			if took > wait+margin {
				t.Errorf("%s gave up after %v; want within the wait %v (+%v)", tt.name, took, wait, margin)
			}
			msg := err.Error()
			for _, want := range []string{"bus: run r", ": waited ", "for the bus at " + url + " to " + tt.what} {
				if !strings.Contains(msg, want) {
					t.Errorf("%s: error %q lacks %q", tt.name, msg, want)
				}
			}
			if we.Waited < wait || we.Waited > wait+margin {
				t.Errorf("%s: Waited = %v, want about %v", tt.name, we.Waited, wait)
			}
		})
	}
	wg.Wait()

	// Collect has its own timeout, and tells its watcher that reading fails
	// (a read unanswered for stallAfter).
	var last error
	_, err = r.CollectWatching(ctx, 1, []string{"a", "b"}, stallAfter+wait, func(w Waiting) {
		if w.Last != nil {
			last = w.Last
		}
	})
	var miss *MissingError
	if !errors.As(err, &miss) || !slices.Equal(miss.Missing, []string{"a", "b"}) {
		t.Fatalf("Collect with the server gone: %v; want a *MissingError naming a and b", err)
	}
	if last == nil {
		t.Error("Collect with the server gone did not tell its watcher of an error")
	}
}

// TestConnectWaits: Connect tries a server that is not up yet again until
// the wait ends, and joins one that comes up in time.
func TestConnectWaits(t *testing.T) {
	ctx := testCtx(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freeLoopbackPorts(t, 1)[0])
	url := "nats://" + addr
	const wait = 700 * time.Millisecond

	start := time.Now()
	_, err := Connect(ctx, url, ClientOptions{Wait: wait})
	took := time.Since(start)
	var we *WaitError
	if !errors.As(err, &we) || !strings.Contains(err.Error(), "waited ") || !strings.Contains(err.Error(), "for the bus at "+url+" to connect") {
		t.Fatalf("Connect to nothing: %v (%T); want a *WaitError naming %s", err, err, url)
	}
	if took < wait || took > wait+margin {
		t.Fatalf("Connect to nothing gave up after %v; want after the wait %v", took, wait)
	}

	// A server that starts 500 ms after the client: joined.
	started := make(chan *Server, 1)
	go func() {
		time.Sleep(500 * time.Millisecond)
		s, err := StartServer(ctx, ServerOptions{Dir: t.TempDir(), Listen: addr, Auth: Auth{Token: "t0"}})
		if err != nil {
			t.Error(err)
		}
		started <- s
	}()
	c, err := Connect(ctx, url, ClientOptions{Token: "t0", Wait: 20 * time.Second})
	if s := <-started; s != nil {
		defer s.Close()
	}
	if err != nil {
		t.Fatalf("Connect to a server starting late: %v", err)
	}
	c.Close()

	// A refusal is final: not tried again until the wait ends.
	start = time.Now()
	_, err = Connect(ctx, url, ClientOptions{Token: "wrong", Wait: 20 * time.Second})
	if err == nil || errors.As(err, &we) || time.Since(start) > margin {
		t.Fatalf("Connect with a wrong token: %v (%T) after %v; want a refusal at once", err, err, time.Since(start))
	}
}

// TestCollectWatching: CollectWatching says which agents it still waits for,
// as their payloads arrive.
func TestCollectWatching(t *testing.T) {
	ctx := testCtx(t)
	r := inProcessRun(t)
	if err := r.Publish(ctx, 3, "a", []byte("from a")); err != nil {
		t.Fatal(err)
	}
	var heard [][]string
	go func() {
		time.Sleep(100 * time.Millisecond)
		r.Publish(ctx, 3, "c", rolloutsLike(2, 5000))
		time.Sleep(100 * time.Millisecond)
		r.Publish(ctx, 3, "b", []byte("from b"))
	}()
	got, err := r.CollectWatching(ctx, 3, []string{"a", "b", "c"}, 10*time.Second, func(w Waiting) {
		heard = append(heard, w.Missing)
		if w.Last != nil {
			t.Errorf("reading from a healthy server met %v", w.Last)
		}
	})
	if err != nil || len(got) != 3 {
		t.Fatalf("collect: %d payloads, %v", len(got), err)
	}
	want := [][]string{{"a", "b", "c"}, {"b", "c"}, {"b"}, nil}
	if !slices.EqualFunc(heard, want, slices.Equal) {
		t.Fatalf("watch heard %q, want %q", heard, want)
	}
}
