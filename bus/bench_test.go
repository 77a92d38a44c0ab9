package bus

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"testing"
	"time"
)

// A paper-sized step per agent: 128 prompts × 8 responses × 4,096 response
// tokens, each an int32 id and a float32 log-prob.
const paperStepBytes = 128 * 8 * 4096 * (4 + 4)

// BenchmarkStepExchange measures one step's exchange: every agent publishes
// its paper-sized payload at once, then each agent collects all of them.
// The collects run one after another to bound this process's memory (each
// holds N × 32 MB); on separate machines they run side by side, so a step
// costs about publish-s + collect-s/agent. Run with
//
//	GOEXPERIMENT=simd go test ./bus -run '^$' -bench StepExchange -benchtime 2x
func BenchmarkStepExchange(b *testing.B) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(1 << 30))
	payload := rolloutsLike(42, paperStepBytes)
	for _, setup := range []string{"embedded", "cluster3"} {
		for _, n := range []int{2, 4, 8} {
			b.Run(fmt.Sprintf("%s/agents=%d", setup, n), func(b *testing.B) {
				var conns []*Conn
				var runs []*Run
				if setup == "embedded" {
					srv := startServer(b, ServerOptions{})
					c := dial(b, srv.URL(), ClientOptions{})
					conns, runs = []*Conn{c}, []*Run{openRun(b, c, RunSpec{})}
				} else {
					for _, s := range startCluster(b, DefaultMaxPayload) {
						c := dial(b, s.URL(), ClientOptions{})
						conns = append(conns, c)
						runs = append(runs, openReplicated(b, c, "bench"))
					}
				}
				agents := agentNames(n)
				ctx := context.Background()
				var pubTotal, colTotal time.Duration
				b.ResetTimer()
				for step := range b.N {
					t0 := time.Now()
					var wg sync.WaitGroup
					errs := make([]error, n)
					for i, a := range agents {
						wg.Go(func() { errs[i] = runs[i%len(runs)].Publish(ctx, step, a, payload) })
					}
					wg.Wait()
					pubTotal += time.Since(t0)
					for _, err := range errs {
						if err != nil {
							b.Fatal(err)
						}
					}
					for i := range agents {
						t1 := time.Now()
						got, err := runs[i%len(runs)].Collect(ctx, step, agents, 5*time.Minute)
						colTotal += time.Since(t1)
						if err != nil {
							b.Fatal(err)
						}
						if len(got) != n || len(got[agents[n-1]]) != len(payload) {
							b.Fatalf("collected %d payloads", len(got))
						}
					}
					b.StopTimer()
					if err := runs[0].DropStep(ctx, step); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				pub := pubTotal.Seconds() / float64(b.N)
				col := colTotal.Seconds() / float64(b.N*n)
				b.ReportMetric(pub, "publish-s")
				b.ReportMetric(col, "collect-s/agent")
				b.ReportMetric(pub+col, "step-s")
				b.ReportMetric(float64(n*len(payload))/1e6/col, "collect-MB/s")
			})
		}
	}
}
