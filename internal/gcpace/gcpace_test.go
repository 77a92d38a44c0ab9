package gcpace

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const gib = 1 << 30
	for _, tt := range []struct {
		live, headroom uint64
		want           int
	}{
		{0, gib, 100},
		{gib / 2, gib, 100},
		{gib, gib, 100},
		{2 * gib, gib, 50},
		{8 * gib, gib, 12},
		{100 * gib, gib, 5},
	} {
		if got := Percent(tt.live, tt.headroom); got != tt.want {
			t.Errorf("Percent(%d, %d) = %d, want %d", tt.live, tt.headroom, got, tt.want)
		}
	}
}

// With a live heap four times the headroom, Keep lowers the GC percentage to
// 25, and restores the old one when its context ends.
func TestKeepFollowsTheLiveHeap(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	live := make([]float32, 64<<20/4) // 64 MiB, pointer-free as the engine's buffers
	runtime.GC()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { Keep(ctx, 16<<20, time.Millisecond); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	got := 100
	for time.Now().Before(deadline) {
		got = gogc()
		if got < 100 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	runtime.KeepAlive(live)
	cancel()
	<-done
	if got > 30 || got < 20 {
		t.Errorf("GC percent %d with 64 MiB live and 16 MiB headroom, want about 25", got)
	}
	if p := debug.SetGCPercent(100); p != 100 {
		t.Errorf("GC percent %d after Keep returned, want the 100 it found", p)
	}
}

// gogc reads the GC percentage without setting it.
func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}
