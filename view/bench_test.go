package view

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hmetrics "github.com/hacrl/hacrl/metrics"
)

var (
	bigOnce sync.Once
	bigDir  string
	bigErr  error
)

// bigRun writes, once per test binary, the metrics of a long run: two agents
// × 100,000 steps with the 30 keys a HACPO run writes per agent, and a
// run-wide time/step per step (300,000 lines, about 190 MB).
func bigRun(b *testing.B) string {
	b.Helper()
	bigOnce.Do(func() {
		bigDir = filepath.Join(os.TempDir(), fmt.Sprintf("hacrl-view-bench-%d", os.Getpid()))
		w, err := hmetrics.Open(bigDir, hmetrics.Fresh, hmetrics.WithTensorBoard(false))
		if err != nil {
			bigErr = err
			return
		}
		defer w.Close()
		keys := []string{"accuracy/train", "capability", "clip/cross_lower_frac", "clip/cross_upper_frac", "clip/self_frac",
			"entropy", "grad_norm", "kl", "length/mean", "length/truncated_frac", "loss/kl", "loss/policy", "lr",
			"omega/gpt-char", "omega/llama-bpe", "ratio/cross_mean", "ratio/self_mean", "retokenize/changed_frac",
			"reward/mean", "reward/std", "skipped_updates", "time/sample", "time/score", "time/update",
			"tokens/trained", "tokens_per_s", "adv/mean", "adv/std", "adv/cross_mean", "update/applied"}
		t0 := 1.79e9
		for step := 1; step <= 100_000; step++ {
			for k, agent := range []string{"gpt-char", "llama-bpe"} {
				v := make(map[string]float64, len(keys))
				for i, key := range keys {
					v[key] = float64((step*31+i*17+k*7)%1000)/997 + float64(i)
				}
				if step%1000 == 0 {
					v["loss/kl"] = float64(0) / float64(step%1000) // NaN: written as null
				}
				if err := w.Write(hmetrics.Record{Step: step, Agent: agent, Time: t0 + float64(step)*1.37, Values: v}); err != nil {
					bigErr = err
					return
				}
			}
			if err := w.Write(hmetrics.Record{Step: step, Time: t0 + float64(step)*1.37, Values: map[string]float64{"time/step": 1.37}}); err != nil {
				bigErr = err
				return
			}
		}
	})
	if bigErr != nil {
		b.Fatal(bigErr)
	}
	return bigDir
}

// peakHeap samples the live heap every millisecond until stop is closed and
// returns the largest value seen.
func peakHeap(stop <-chan struct{}) <-chan uint64 {
	out := make(chan uint64, 1)
	go func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		var peak uint64
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-stop:
				out <- peak
				return
			case <-t.C:
			}
		}
	}()
	return out
}

// BenchmarkMetrics200k serves a 200,000-record metrics file (bigRun) from
// offset 0 to its end, chunk after chunk, as the page loads a long run, and
// reports the time, the answers, the records per second and the peak live
// heap of the process (server and client). The server is started once: its
// first look at the file (New, which finds last_step) is measured apart.
func BenchmarkMetrics200k(b *testing.B) {
	dir := bigRun(b)
	st, err := os.Stat(filepath.Join(dir, hmetrics.FileName))
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	stop := make(chan struct{})
	peak := peakHeap(stop)
	t0 := time.Now()
	s, err := New(Config{Runs: []string{dir}})
	if err != nil {
		b.Fatal(err)
	}
	firstScan := time.Since(t0)
	close(stop)
	scanPeak := <-peak
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	runtime.GC()
	var records atomic.Int64
	b.ResetTimer()
	for range b.N {
		stop := make(chan struct{})
		peak := peakHeap(stop)
		var off int64
		answers := 0
		for {
			resp, err := http.Get(ts.URL + "/api/metrics?run=0&offset=" + strconv.FormatInt(off, 10))
			if err != nil {
				b.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				b.Fatalf("offset %d: %d %v %.200s", off, resp.StatusCode, err, body)
			}
			answers++
			// {"offset":M,… — the client here reads only where to go on.
			rest, _ := bytes.CutPrefix(body, []byte(`{"offset":`))
			next, err := strconv.ParseInt(string(rest[:bytes.IndexByte(rest, ',')]), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			records.Add(int64(bytes.Count(body, []byte(`{"step":`))))
			if next == off {
				break
			}
			off = next
		}
		close(stop)
		if off != st.Size() {
			b.Fatalf("ended at offset %d of %d", off, st.Size())
		}
		b.ReportMetric(float64(<-peak)/(1<<20), "MiB-peak-heap")
		b.ReportMetric(float64(answers), "answers")
	}
	b.ReportMetric(float64(records.Load())/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(records.Load())/float64(b.N), "records")
	b.ReportMetric(firstScan.Seconds(), "s-first-scan")
	b.ReportMetric(float64(scanPeak)/(1<<20), "MiB-peak-heap-first-scan")
	b.ReportMetric(float64(st.Size())/(1<<20), "MiB-file")
}
