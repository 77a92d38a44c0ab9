// Package tboracle checks a run's TensorBoard event files against its
// metrics.jsonl with TensorBoard's own reader (EventAccumulator, from the
// project's Python environment, package internal/pyenv): what a user sees
// in `tensorboard --logdir OUT/tb` must be exactly the run's metrics.
package tboracle

import (
	"maps"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/hacrl/hacrl/internal/pyenv"
	"github.com/hacrl/hacrl/metrics"
)

// scalar is one point as TensorBoard reads it: step, value (a number, or
// "nan", "inf", "-inf") and wall time.
type scalar [3]any

// Check fails t unless TensorBoard, reading out/tb, finds exactly the
// scalars of out/metrics.jsonl: for every record with values, one run
// directory per agent (metrics.TensorBoardRun), one point per key at the
// record's step and time, with the value rounded to float32 as event files
// store it; no other run, tag or point.
func Check(t testing.TB, out string) {
	t.Helper()
	recs, err := metrics.ReadFile(filepath.Join(out, metrics.FileName))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string][]scalar{}
	for _, r := range recs {
		run := metrics.TensorBoardRun(r.Agent)
		for k, v := range r.Values {
			if want[run] == nil {
				want[run] = map[string][]scalar{}
			}
			want[run][k] = append(want[run][k], scalar{float64(r.Step), float32Value(v), r.Time})
		}
	}
	var got struct {
		Runs map[string]map[string][]scalar
	}
	pyenv.Run(t, script(), nil, &got, filepath.Join(out, "tb"))
	for _, run := range slices.Sorted(maps.Keys(want)) {
		if got.Runs[run] == nil {
			t.Errorf("TensorBoard finds no run %q under %s", run, filepath.Join(out, "tb"))
			continue
		}
		for _, tag := range slices.Sorted(maps.Keys(want[run])) {
			g, w := got.Runs[run][tag], want[run][tag]
			if len(g) != len(w) {
				t.Errorf("run %s, tag %s: TensorBoard reads %d points, metrics.jsonl has %d", run, tag, len(g), len(w))
				continue
			}
			for i := range w {
				if !same(g[i], w[i]) {
					t.Errorf("run %s, tag %s, point %d: TensorBoard reads (step, value, time) %v, metrics.jsonl %v", run, tag, i, g[i], w[i])
					break
				}
			}
		}
		for tag := range got.Runs[run] {
			if _, ok := want[run][tag]; !ok {
				t.Errorf("run %s: TensorBoard reads tag %s, which metrics.jsonl lacks", run, tag)
			}
		}
	}
	for run := range got.Runs {
		if want[run] == nil {
			t.Errorf("TensorBoard reads run %q, which metrics.jsonl lacks", run)
		}
	}
}

// float32Value is v as an event file holds it: rounded to float32, and
// NaN (metrics.jsonl's null) or an infinity as TensorBoard prints it.
func float32Value(v float64) any {
	f := float64(float32(v))
	switch {
	case math.IsNaN(v):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return f
}

// same compares points: steps and values exactly, wall times to the
// microsecond (both sides are float64 seconds; JSON may round the last bit).
func same(g, w scalar) bool {
	if g[0] != w[0] {
		return false
	}
	if gv, ok := g[1].(float64); ok {
		if wv, ok := w[1].(float64); !ok || gv != wv {
			return false
		}
	} else if g[1] != w[1] {
		// A null in metrics.jsonl is NaN, ±Inf or NaN in the event file.
		if w[1] != "nan" {
			return false
		}
	}
	gt, ok1 := g[2].(float64)
	wt, ok2 := w[2].(float64)
	return ok1 && ok2 && math.Abs(gt-wt) < 1e-6
}

func script() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "tb_scalars.py")
}
