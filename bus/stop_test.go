package bus

import (
	"reflect"
	"testing"
	"time"
)

// TestStopRequests: the stop agreement's parts on a real server. A stop
// request is read with the step's payloads and by every reader alike; it
// does not travel with (or change) a payload, it does not disturb Collect
// or the steps listed for housekeeping, and one stored before a session's
// start does not count in that session. Published tells a step already
// published, even in part, from one that is not.
func TestStopRequests(t *testing.T) {
	ctx := testCtx(t)
	srv := startServer(t, ServerOptions{MaxPayload: 64 << 10})
	a := openRun(t, dial(t, srv.URL(), ClientOptions{}), RunSpec{})
	b := openRun(t, dial(t, srv.URL(), ClientOptions{}), RunSpec{})
	session, err := a.Sequence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if session != 0 {
		t.Fatalf("an empty stream's sequence is %d, want 0", session)
	}
	big := rolloutsLike(7, 200_000) // 4 chunks

	// "a" is a step ahead: it has published step 2 when "b", interrupted,
	// asks to stop with its own step 2.
	for _, step := range []int{1, 2} {
		if err := a.Publish(ctx, step, "a", big); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Publish(ctx, 1, "b", []byte("b1")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		step      int
		agent     string
		published bool
	}{{1, "b", true}, {2, "a", true}, {2, "b", false}, {3, "a", false}} {
		if got, err := b.Published(ctx, c.step, c.agent); err != nil || got != c.published {
			t.Fatalf("Published(step %d, %s) = %v, %v; want %v", c.step, c.agent, got, err, c.published)
		}
	}
	if err := a.publish(ctx, 3, "a", big, func(i int) bool { return i == 1 }); err != nil { // a crash midway
		t.Fatal(err)
	}
	if got, err := a.Published(ctx, 3, "a"); err != nil || !got {
		t.Fatalf("Published(step 3, a) with one chunk of four stored = %v, %v; want true", got, err)
	}

	if err := b.AskStop(ctx, 2, "b"); err != nil {
		t.Fatal(err)
	}
	if err := b.Publish(ctx, 2, "b", []byte("b2")); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*Run{a, b} {
		got, err := r.Collect(ctx, 2, []string{"a", "b"}, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if string(got["b"]) != "b2" || len(got["a"]) != len(big) {
			t.Fatalf("step 2's payloads changed with the stop request: b %q, a %d bytes", got["b"], len(got["a"]))
		}
		for step, want := range map[int][]string{1: nil, 2: {"b"}} {
			if by, err := r.StopAsked(ctx, step, session); err != nil || !reflect.DeepEqual(by, want) {
				t.Fatalf("StopAsked(step %d) = %v, %v; want %v", step, by, err, want)
			}
		}
	}
	if steps, err := a.Steps(ctx); err != nil || !reflect.DeepEqual(steps, []int{1, 2, 3}) {
		t.Fatalf("Steps = %v, %v; want [1 2 3]", steps, err)
	}

	// A later session (a --resume) does not stop at step 2 again; a
	// request made in it does count.
	later, err := a.Sequence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if later <= session {
		t.Fatalf("sequence %d after publishing, want above %d", later, session)
	}
	if by, err := a.StopAsked(ctx, 2, later); err != nil || len(by) != 0 {
		t.Fatalf("StopAsked(step 2) in a later session = %v, %v; want none", by, err)
	}
	if err := a.AskStop(ctx, 2, "a"); err != nil {
		t.Fatal(err)
	}
	if by, err := b.StopAsked(ctx, 2, later); err != nil || !reflect.DeepEqual(by, []string{"a"}) {
		t.Fatalf("StopAsked(step 2) after a request of the later session = %v, %v; want [a]", by, err)
	}
	if by, err := b.StopAsked(ctx, 2, session); err != nil || !reflect.DeepEqual(by, []string{"a", "b"}) {
		t.Fatalf("StopAsked(step 2) since the first session = %v, %v; want [a b]", by, err)
	}

	// Dropping a step drops its requests with it.
	if err := a.DropStep(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if by, err := a.StopAsked(ctx, 2, session); err != nil || len(by) != 0 {
		t.Fatalf("StopAsked(step 2) after DropStep = %v, %v; want none", by, err)
	}
}
