package train

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/internal/mlflowtest"
	"github.com/hacrl/hacrl/metrics"
	"github.com/hacrl/hacrl/tracking/mlflow"
)

// trackObserver records the run's log and runs a hook after each step.
type trackObserver struct {
	mu     sync.Mutex
	log    []string
	onStep func(step int)
}

func (o *trackObserver) Phase(int, string, string) {}
func (o *trackObserver) Step(step, _ int, _ time.Duration, _ map[string]string) {
	if o.onStep != nil {
		o.onStep(step)
	}
}
func (o *trackObserver) Log(msg string) { o.mu.Lock(); o.log = append(o.log, msg); o.mu.Unlock() }
func (o *trackObserver) text() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.Join(o.log, "\n")
}

// TestMLflowTracking trains a short real run that logs to a real `mlflow
// server` and reads the MLflow run back with MLflow's Python client: every
// metric of metrics.jsonl with its value, step and time, the params, tags
// and status — although the server was killed after step 1 and came back
// only after step 2. Then the run's last checkpoint is damaged and the run
// resumed for two more steps: it continues the same MLflow run, and the step
// it computes again (3) is not logged twice.
func TestMLflowTracking(t *testing.T) {
	srv := mlflowtest.Start(t)
	dir := t.TempDir()
	cfg := tinyConfig(t, dir, "hacpo", 3)
	cfg.Tracking = &config.Tracking{MLflow: &config.MLflow{URI: srv.URI, Experiment: "hacrl-test"}}
	client, err := mlflow.NewClient(srv.URI, "", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The server goes down once it holds step 1's metrics (so that the run
	// was made and step 2's are sent while it is down), and is back after
	// step 2.
	obs := &trackObserver{onStep: func(step int) {
		switch step {
		case 1:
			waitForStep(t, client, cfg.Out, 1)
			srv.Kill()
		case 2:
			srv.Restart()
		}
	}}
	run, err := New(context.Background(), cfg, Options{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	log := obs.text()
	if n := strings.Count(log, "training goes on"); n != 1 {
		t.Errorf("the server's absence was reported %d times, want once:\n%s", n, log)
	}
	if strings.Contains(log, "not logged") {
		t.Errorf("metrics were dropped although the server came back during the run:\n%s", log)
	}
	var st struct {
		RunID string `json:"run_id"`
	}
	data, err := os.ReadFile(filepath.Join(cfg.Out, mlflow.StateFile))
	if err != nil || json.Unmarshal(data, &st) != nil || st.RunID == "" {
		t.Fatalf("%s: %s (%v)", mlflow.StateFile, data, err)
	}
	first := readMetrics(t, cfg)
	checkMLflowRun(t, srv.ReadRun(st.RunID), first)

	// Resume from step 2: the step-3 checkpoint lost its state.
	if err := os.Remove(filepath.Join(cfg.Out, "checkpoints", "step-00000003", "state.json")); err != nil {
		t.Fatal(err)
	}
	cfg.Steps = 5
	obs = &trackObserver{}
	run, err = New(context.Background(), cfg, Options{Observer: obs, Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	if run.StartStep() != 2 {
		t.Fatalf("resumed at step %d, want 2", run.StartStep())
	}
	if _, err := run.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(obs.text(), "mlflow: continuing run "+srv.URI) {
		t.Errorf("the resumed run's log does not say it continues the MLflow run:\n%s", obs.text())
	}
	if data2, _ := os.ReadFile(filepath.Join(cfg.Out, mlflow.StateFile)); string(data2) != string(data) {
		t.Errorf("%s changed on resume:\n%s\nwas\n%s", mlflow.StateFile, data2, data)
	}
	// MLflow keeps step 3 as the first run logged it; the resumed run's
	// own record of it is not logged again.
	want := first
	for _, rec := range readMetrics(t, cfg) {
		if rec.Step > 3 {
			want = append(want, rec)
		}
	}
	checkMLflowRun(t, srv.ReadRun(st.RunID), want)
}

// waitForStep waits until the MLflow run of out holds metrics of step.
func waitForStep(t *testing.T, c *mlflow.Client, out string, step int64) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var st struct {
			RunID string `json:"run_id"`
		}
		data, err := os.ReadFile(filepath.Join(out, mlflow.StateFile))
		if err != nil || json.Unmarshal(data, &st) != nil {
			continue
		}
		run, err := c.GetRun(context.Background(), st.RunID)
		if err != nil {
			continue
		}
		for _, m := range run.Data.Metrics {
			if m.Step >= step {
				return
			}
		}
	}
	t.Fatalf("the MLflow run of %s holds no metrics of step %d after a minute", out, step)
}

func readMetrics(t *testing.T, cfg *config.Config) []metrics.Record {
	t.Helper()
	recs, err := metrics.ReadFile(filepath.Join(cfg.Out, metrics.FileName))
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// checkMLflowRun holds the MLflow run to the records of metrics.jsonl: every
// value of every record, at its step and time, once, and nothing else.
func checkMLflowRun(t *testing.T, run *mlflowtest.Run, recs []metrics.Record) {
	t.Helper()
	if run.Status != "FINISHED" || run.Experiment != "hacrl-test" || run.RunName != "out" {
		t.Errorf("run: status %q, experiment %q, name %q; want FINISHED, hacrl-test, out", run.Status, run.Experiment, run.RunName)
	}
	if run.Params["method"] != "hacpo" || run.Params["seed"] != "7" || len(run.Params) != 2 {
		t.Errorf("params %v, want method hacpo and seed 7", run.Params)
	}
	if run.Tags["hacrl.method"] != "hacpo" || run.Tags["hacrl.agents"] != "gpt-char,llama-char,llama-bpe" ||
		!strings.HasPrefix(run.Tags["hacrl.config_hash"], "sha256:") || run.Tags["hacrl.version"] == "" {
		t.Errorf("tags %v", run.Tags)
	}
	logged := run.ByStep(t)
	want := 0
	keys := map[string]bool{}
	for _, rec := range recs {
		for k, v := range rec.Values {
			key := k
			if rec.Agent != "" {
				key = rec.Agent + "/" + k
			}
			key = mlflow.Key(key)
			keys[key] = true
			want++
			p, ok := logged[key][int64(rec.Step)]
			switch {
			case !ok:
				t.Errorf("%s at step %d (agent %q, key %q) is not in MLflow", key, rec.Step, rec.Agent, k)
			case !(p.Value == v || math.IsNaN(v) && math.IsNaN(p.Value)):
				t.Errorf("%s at step %d: MLflow has %v, metrics.jsonl %v", key, rec.Step, p.Value, v)
			case math.Abs(float64(p.Timestamp)-rec.Time*1000) > 1:
				t.Errorf("%s at step %d: MLflow's time %d ms, metrics.jsonl's %.3f s", key, rec.Step, p.Timestamp, rec.Time)
			}
		}
	}
	got := 0
	for k, h := range run.Metrics {
		got += len(h)
		if !keys[k] {
			t.Errorf("MLflow has %s, which metrics.jsonl has not", k)
		}
	}
	if got != want || want == 0 {
		t.Errorf("MLflow holds %d values, metrics.jsonl %d", got, want)
	}
	t.Logf("%d values of %d metrics, steps 0–%d, match", want, len(keys), recs[len(recs)-1].Step)
}

// TestMLflowTokenEnvUnset: a token_env naming an unset variable stops the
// run before it writes anything, naming the key and the variable.
func TestMLflowTokenEnvUnset(t *testing.T) {
	cfg := tinyConfig(t, t.TempDir(), "hacpo", 1)
	cfg.Tracking = &config.Tracking{MLflow: &config.MLflow{URI: "http://127.0.0.1:1", TokenEnv: "HACRL_TEST_MLFLOW_TOKEN"}}
	t.Setenv("HACRL_TEST_MLFLOW_TOKEN", "")
	_, err := New(context.Background(), cfg, Options{})
	if err == nil || !strings.Contains(err.Error(), "tracking.mlflow.token_env: environment variable HACRL_TEST_MLFLOW_TOKEN is not set") {
		t.Fatalf("New: %v", err)
	}
	entries, _ := os.ReadDir(cfg.Out)
	for _, e := range entries {
		if e.Name() != ".lock" && !strings.HasPrefix(e.Name(), ".") {
			t.Errorf("%s holds %s after a run that did not start", cfg.Out, e.Name())
		}
	}
}
