package bus

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"testing"
	"time"
)

// freeLoopbackPorts reserves n free loopback ports (the routes of a cluster
// must be known before its servers start).
func freeLoopbackPorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		defer l.Close()
	}
	return ports
}

// startCluster starts a three-server NATS cluster on loopback, every server
// routing to the others, and waits until JetStream has a meta leader.
func startCluster(t testing.TB, maxPayload int32) []*Server {
	t.Helper()
	ports := freeLoopbackPorts(t, 3)
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	srvs := make([]*Server, 3)
	for i := range srvs {
		srvs[i] = startServer(t, ServerOptions{
			Name:       fmt.Sprintf("n%d", i),
			MaxPayload: maxPayload,
			Cluster: ClusterOptions{
				Name:   "hacrl-test",
				Listen: fmt.Sprintf("127.0.0.1:%d", ports[i]),
				Routes: routes,
			},
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range srvs {
		if err := s.WaitJetStream(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return srvs
}

// openReplicated opens a run with three replicas, retrying while the cluster
// is still placing its first assets.
func openReplicated(t testing.TB, c *Conn, id string) *Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		r, err := c.OpenRun(ctx, RunSpec{ID: id, ConfigHash: "h", Replicas: 3})
		if err == nil {
			return r
		}
		if ctx.Err() != nil {
			t.Fatalf("open a replicated run: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestThreeNodeCluster(t *testing.T) {
	ctx := testCtx(t)
	srvs := startCluster(t, 256<<10)
	pub := dial(t, srvs[0].URL(), ClientOptions{})
	sub := dial(t, srvs[2].URL(), ClientOptions{})
	rp := openReplicated(t, pub, "cl")
	rs := openReplicated(t, sub, "cl")

	info, err := rp.stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("stream is not replicated on three servers: %+v", info.Cluster)
	}

	agents := agentNames(3)
	for step, down := range []bool{false, true} {
		if down {
			srvs[1].Close() // a minority down: the stream keeps its quorum
		}
		want := map[string][]byte{}
		for i, a := range agents {
			want[a] = rolloutsLike(uint64(100*step+i), 600_000) // 3 chunks
			if err := rp.Publish(ctx, step, a, want[a]); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
		}
		got, err := rs.Collect(ctx, step, agents, 20*time.Second)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		for _, a := range agents {
			if !bytes.Equal(got[a], want[a]) {
				t.Errorf("step %d agent %s: payload differs across the cluster", step, a)
			}
		}
	}
}
