package mlflow_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hacrl/hacrl/internal/mlflowtest"
	"github.com/hacrl/hacrl/metrics"
	"github.com/hacrl/hacrl/tracking/mlflow"
)

func TestKey(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"reward/mean", "reward/mean"},
		{"gpt-char/omega/llama-bpe", "gpt-char/omega/llama-bpe"},
		{"eval/test/avg@4", "eval/test/avg_4"},
		{"time/step", "time/step"},
		{"ω/x y:z.w", "ω/x y:z.w"},
		{"a+b=c", "a_b_c"},
	} {
		if got := mlflow.Key(tc.in); got != tc.want {
			t.Errorf("Key(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestFloatJSON(t *testing.T) {
	for _, v := range []float64{0, -1.5, 1e-300, math.MaxFloat64, math.NaN(), math.Inf(1), math.Inf(-1)} {
		b, err := mlflow.Float(v).MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var back mlflow.Float
		if err := back.UnmarshalJSON(b); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if g := float64(back); g != v && !(math.IsNaN(g) && math.IsNaN(v)) {
			t.Errorf("%v → %s → %v", v, b, g)
		}
	}
}

// TestClientAgainstServer logs to a real `mlflow server` and reads the run
// back with MLflow's Python client: a batch over MLflow's 1000-metric limit
// (split into requests), non-finite values, params, tags, the run's status;
// then a Tracker's bearer token, through a loopback proxy that requires it
// (checkToken).
func TestClientAgainstServer(t *testing.T) {
	srv := mlflowtest.Start(t)
	ctx := context.Background()
	c, err := mlflow.NewClient(srv.URI, "", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	exp, err := c.ExperimentID(ctx, "client-test")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := c.ExperimentID(ctx, "client-test"); err != nil || again != exp {
		t.Fatalf("ExperimentID again = %q, %v; want the same experiment %q", again, err, exp)
	}
	id, err := c.CreateRun(ctx, exp, "r1", time.Now(), []mlflow.Tag{{Key: "hacrl.method", Value: "hacpo"}})
	if err != nil {
		t.Fatal(err)
	}
	// 1200 values of 30 metrics (40 steps): two requests; special values
	// at step 41.
	var ms []mlflow.Metric
	for i := range 1200 {
		ms = append(ms, mlflow.Metric{Key: fmt.Sprintf("m/%02d", i%30), Value: mlflow.Float(float64(i) / 7), Timestamp: 1_790_000_000_000 + int64(i), Step: int64(i / 30)})
	}
	special := map[string]float64{"s/nan": math.NaN(), "s/inf": math.Inf(1), "s/ninf": math.Inf(-1), "s/tiny": 5e-324}
	// MLflow stores ±Inf as ±MaxFloat64 (its SQL store), NaN as NaN.
	stored := func(v float64) float64 {
		if math.IsInf(v, 0) {
			return math.Copysign(math.MaxFloat64, v)
		}
		return v
	}
	for k, v := range special {
		ms = append(ms, mlflow.Metric{Key: k, Value: mlflow.Float(v), Timestamp: 1_790_000_001_000, Step: 41})
	}
	params := []mlflow.Param{{Key: "method", Value: "hacpo"}, {Key: "seed", Value: "7"}}
	if err := c.LogBatch(ctx, id, ms, params, nil); err != nil {
		t.Fatal(err)
	}
	// MLflow refuses a name with '@': the reason for Key.
	err = c.LogBatch(ctx, id, []mlflow.Metric{{Key: "eval/test/avg@4", Value: 1, Step: 1}}, nil, nil)
	var ae *mlflow.APIError
	if !errors.As(err, &ae) || ae.Status != 400 || mlflow.Retryable(err) {
		t.Errorf("logging a name with '@': %v; want a 400 that is not retried", err)
	}
	if err := c.UpdateRun(ctx, id, mlflow.Finished, time.Now()); err != nil {
		t.Fatal(err)
	}
	run := srv.ReadRun(id)
	if run.Status != "FINISHED" || run.RunName != "r1" || run.Experiment != "client-test" ||
		run.Params["method"] != "hacpo" || run.Params["seed"] != "7" || run.Tags["hacrl.method"] != "hacpo" {
		t.Errorf("run read back: status %q, name %q, experiment %q, params %v, tag hacrl.method %q",
			run.Status, run.RunName, run.Experiment, run.Params, run.Tags["hacrl.method"])
	}
	if len(run.Metrics) != 30+len(special) {
		t.Errorf("%d metrics read back, want %d", len(run.Metrics), 30+len(special))
	}
	got := run.ByStep(t)
	for _, m := range ms {
		p, ok := got[m.Key][m.Step]
		v := stored(float64(m.Value))
		if !ok || p.Timestamp != m.Timestamp || !(p.Value == v || math.IsNaN(v) && math.IsNaN(p.Value)) {
			t.Errorf("%s at step %d: read back %+v (found %v), want %v at time %d", m.Key, m.Step, p, ok, v, m.Timestamp)
		}
	}
	checkToken(t, srv)
	checkRefused(t, srv)

	back, err := c.GetRun(ctx, id)
	if err != nil || back.Info.Status != "FINISHED" || len(back.Data.Metrics) != len(run.Metrics) {
		t.Fatalf("GetRun: %+v, %v", back, err)
	}
	for _, m := range back.Data.Metrics { // the latest value of each
		if want := int64(39); strings.HasPrefix(m.Key, "m/") && m.Step != want {
			t.Errorf("GetRun: latest %s at step %d, want %d", m.Key, m.Step, want)
		}
	}
}

// deadAddress is a loopback address where nothing listens.
func deadAddress(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) add(s string) { l.mu.Lock(); l.lines = append(l.lines, s); l.mu.Unlock() }
func (l *logs) all() string  { l.mu.Lock(); defer l.mu.Unlock(); return strings.Join(l.lines, "\n") }

// TestTrackerServerDown: with no server at all, recording never blocks,
// the queue stays bounded (oldest steps dropped), the failure is warned
// about once, and Close reports every step as not logged within its
// deadline.
func TestTrackerServerDown(t *testing.T) {
	var log logs
	tr, err := mlflow.Start(mlflow.Options{URI: deadAddress(t), Experiment: "e", RunName: "r", Dir: t.TempDir(),
		Log: log.add, MaxPending: 4, Linger: time.Millisecond, FlushTimeout: 500 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	for step := 1; step <= 20; step++ {
		tr.Record(metrics.Record{Step: step, Agent: "a", Time: 1.79e9, Values: map[string]float64{"x": 1, "y": 2}})
		tr.Record(metrics.Record{Step: step, Time: 1.79e9, Values: map[string]float64{"time/step": 0.1}})
	}
	if d := time.Since(t0); d > 100*time.Millisecond {
		t.Errorf("recording 20 steps took %v with the server down", d)
	}
	if b, _ := tr.Dropped(); b < 15 {
		t.Errorf("%d steps dropped with room for 4 of 20, want at least 15", b)
	}
	t1 := time.Now()
	tr.Close(mlflow.Finished)
	if d := time.Since(t1); d > 3*time.Second {
		t.Errorf("Close took %v, past its 500 ms deadline", d)
	}
	if b, v := tr.Dropped(); b != 20 || v != 60 {
		t.Errorf("Dropped() = %d batches, %d values; want 20, 60", b, v)
	}
	out := log.all()
	if strings.Count(out, "training goes on") != 1 || !strings.Contains(out, "no MLflow run was made, and the metrics of 20 steps (60 values) were not logged") {
		t.Errorf("log:\n%s\nwant one warning and the final report", out)
	}
}

// checkToken puts a proxy that requires "Authorization: Bearer s3cret" in
// front of srv: a Tracker with that token logs through it; one with another
// token is refused (401), which is not retried: it logs nothing, says so
// once, and its Close returns at once.
func checkToken(t *testing.T, srv *mlflowtest.Server) {
	target, err := url.Parse(srv.URI)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error_code": "UNAUTHENTICATED", "message": "bad token"}`)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	for _, token := range []string{"s3cret", "wrong"} {
		var log logs
		tr, err := mlflow.Start(mlflow.Options{URI: front.URL, Experiment: "token", RunName: token, Token: token, Dir: t.TempDir(),
			Log: log.add, Linger: time.Millisecond, FlushTimeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for step := 1; step <= 3; step++ {
			tr.Record(metrics.Record{Step: step, Agent: "a", Time: 1.79e9 + float64(step), Values: map[string]float64{"x": float64(step)}})
		}
		t0 := time.Now()
		tr.Close(mlflow.Finished)
		if token == "wrong" {
			if tr.RunID() != "" || !strings.Contains(log.all(), "HTTP 401 UNAUTHENTICATED: bad token; this run is not logged to MLflow (training goes on)") || time.Since(t0) > 5*time.Second {
				t.Errorf("a refused token: run %q, Close took %v, log:\n%s", tr.RunID(), time.Since(t0), log.all())
			}
			continue
		}
		if tr.RunID() == "" {
			t.Errorf("with the token the proxy wants, no run was made; log:\n%s", log.all())
			continue
		}
		run := srv.ReadRun(tr.RunID())
		if h := run.Metrics["a/x"]; run.Status != "FINISHED" || len(h) != 3 || h[2].Step != 3 || h[2].Value != 3 || log.all() != "mlflow: logging to run "+front.URL+"/#/experiments/"+run.ExperimentID+"/runs/"+tr.RunID() {
			t.Errorf("through the proxy with the token: status %q, a/x %v, log %q", run.Status, h, log.all())
		}
	}
}

// checkRefused: batches the server refuses (400: "x//y" is a name MLflow
// refuses, one that would resolve to "x/y" as a path) are dropped, not
// retried; the first refusal is logged, and Close counts them all.
func checkRefused(t *testing.T, srv *mlflowtest.Server) {
	var log logs
	tr, err := mlflow.Start(mlflow.Options{URI: srv.URI, Experiment: "refused", RunName: "r", Dir: t.TempDir(),
		Log: log.add, Linger: time.Millisecond, FlushTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for step := 1; step <= 3; step++ {
		tr.Record(metrics.Record{Step: step, Time: 1.79e9, Values: map[string]float64{"x//y": 1}})
		time.Sleep(20 * time.Millisecond)
	}
	tr.Close(mlflow.Finished)
	out := log.all()
	if b, v := tr.Dropped(); b != 3 || v != 3 || strings.Count(out, "the server refused") != 1 ||
		!strings.Contains(out, "the metrics of 3 of 3 steps (3 values) were not logged to MLflow run "+tr.RunID()) {
		t.Errorf("refused batches: Dropped() = %d, %d; log:\n%s", b, v, out)
	}
	if run := srv.ReadRun(tr.RunID()); run.Status != "FINISHED" || len(run.Metrics) != 0 {
		t.Errorf("run with refused batches: status %q, metrics %v", run.Status, run.Metrics)
	}
}

// TestStateFile: a resumed run's OUT/mlflow.json that is not one gives an
// error naming it; one naming another server is set aside with a message
// (the run logs to a new MLflow run there); a fresh run removes a stale one.
func TestStateFile(t *testing.T) {
	dead := deadAddress(t)
	for _, tc := range []struct {
		name, state string
		resume      bool
		err, log    string
		kept        bool
	}{
		{"garbage", "{not json", true, "mlflow.json: not the MLflow run of this output directory", "", true},
		{"no run id", `{"uri": "` + dead + `"}`, true, "mlflow.json: not the MLflow run of this output directory", "", true},
		{"other server", `{"uri": "http://127.0.0.1:1", "experiment_id": "1", "run_id": "abc"}`, true, "", "names a run on http://127.0.0.1:1; the config's tracking.mlflow.uri is " + dead + ": logging to a new run there", false},
		{"fresh run", `{"uri": "` + dead + `", "experiment_id": "1", "run_id": "abc"}`, false, "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, mlflow.StateFile)
			if err := os.WriteFile(path, []byte(tc.state), 0o644); err != nil {
				t.Fatal(err)
			}
			var log logs
			tr, err := mlflow.Start(mlflow.Options{URI: dead, Experiment: "e", Dir: dir, Resume: tc.resume, Log: log.add, FlushTimeout: time.Millisecond})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Start: %v, want an error naming %s: %s", err, path, tc.err)
				}
			} else if err != nil {
				t.Fatal(err)
			} else {
				tr.Close(mlflow.Finished)
			}
			if _, err := os.Stat(path); (err == nil) != tc.kept {
				t.Errorf("%s kept: %v, want %v", path, err == nil, tc.kept)
			}
			if tc.log != "" && !strings.Contains(log.all(), tc.log) {
				t.Errorf("log:\n%s\nwant %q", log.all(), tc.log)
			}
		})
	}
}
