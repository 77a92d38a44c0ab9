package metrics_test

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/hacrl/hacrl/internal/tboracle"
	"github.com/hacrl/hacrl/metrics"
)

// TensorBoard's own reader (EventAccumulator) finds every scalar of
// metrics.jsonl in OUT/tb, with its step, float32 value and wall time, for
// agents whose names TensorBoardRun rewrites, NaN and infinite values,
// values beyond float32's range, and a run resumed after a crash that left
// half an event and half a line behind.
func TestTensorBoardReadsWhatMetricsHolds(t *testing.T) {
	dir := t.TempDir()
	agents := []string{"qwen3-0.6b", "llama 3.2/1b", ""}
	write := func(w *metrics.Writer, from, to int) {
		t.Helper()
		for s := from; s <= to; s++ {
			for i, a := range agents {
				x := float64(s*10 + i)
				vals := map[string]float64{
					"reward/mean": x / 7, "loss/policy": -x / 3, "eval/math500/avg@4": 1 / (x + 1),
					"omega/llama 3.2/1b": math.Exp(x / 5), "grad_norm": 1e40 * x,
				}
				if s == 2 {
					vals["loss/kl"] = math.NaN()
					vals["entropy"] = math.Inf(1)
				}
				if err := w.Write(metrics.Record{Step: s, Agent: a, Time: 1.7e9 + float64(s) + 0.125*float64(i), Values: vals}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	w, err := metrics.Open(dir, metrics.Fresh, metrics.WithHost("h"))
	if err != nil {
		t.Fatal(err)
	}
	write(w, 0, 6)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// A crash after step 6 (checkpoint at 4): half a line, and half an event
	// in every agent's event file.
	f, _ := os.OpenFile(filepath.Join(dir, metrics.FileName), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"step":7,"agent":"qw`)
	f.Close()
	files, _ := filepath.Glob(filepath.Join(dir, "tb", "*", "events.out.tfevents.*"))
	if len(files) != len(agents) {
		t.Fatalf("%d event files, want one per agent: %v", len(files), files)
	}
	for _, p := range files {
		f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
		f.Write([]byte{40, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3})
		f.Close()
	}
	w, err = metrics.Open(dir, 4, metrics.WithHost("h"))
	if err != nil {
		t.Fatal(err)
	}
	write(w, 5, 9)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	tboracle.Check(t, dir)
}
