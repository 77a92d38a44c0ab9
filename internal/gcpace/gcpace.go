// Package gcpace bounds the memory the garbage collector lets garbage take
// when the live heap is large. Go's default (GOGC=100) starts a collection
// when the heap has grown by as much as was live after the last one: right
// for small heaps, but a process holding 8 GB of model weights, gradients
// and optimizer moments could then reach 16 GB before collecting a byte.
// Keep holds the headroom to at most a fixed amount instead, by lowering
// the GC percentage as the live heap grows (and raising it back, to at most
// 100, as it shrinks). hacrl's float32 buffers hold no pointers, so the
// extra collections scan little and cost little.
package gcpace

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Percent is the GC percentage that gives a heap of live bytes at most
// headroom bytes of garbage before a collection: 100 while live ≤ headroom,
// then 100·headroom/live, and never below 5.
func Percent(live, headroom uint64) int {
	if live <= headroom {
		return 100
	}
	return max(5, int(100*headroom/live))
}

// Keep adjusts the GC percentage every interval from the live heap (the
// runtime/metrics "/gc/heap/live:bytes" after the last collection) until ctx
// ends, then restores the setting it found.
func Keep(ctx context.Context, headroom uint64, interval time.Duration) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	old := debug.SetGCPercent(100)
	debug.SetGCPercent(old)
	defer debug.SetGCPercent(old)
	current := old
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 {
			if p := Percent(sample[0].Value.Uint64(), headroom); p != current {
				debug.SetGCPercent(p)
				current = p
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
