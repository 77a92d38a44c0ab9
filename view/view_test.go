package view

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/metrics"
	"github.com/hacrl/hacrl/rollout"
	"github.com/hacrl/hacrl/train"
)

var (
	runOnce sync.Once
	runDir  string
	runErr  error
	runTmp  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	for _, dir := range []string{runTmp, bigDir} {
		if dir != "" {
			os.RemoveAll(dir)
		}
	}
	os.Exit(code)
}

// realRun trains the two example agents for two steps, every step's
// rollouts logged and the agents evaluated at the end, once per test
// binary, and returns the run directory. Tests that change a run work on a
// copy (copyRun).
func realRun(t testing.TB) string {
	t.Helper()
	runOnce.Do(func() {
		if runTmp, runErr = os.MkdirTemp("", "hacrl-view-test-"); runErr != nil {
			return
		}
		agents, err := filepath.Abs("../examples/agents")
		if err != nil {
			runErr = err
			return
		}
		out := filepath.Join(runTmp, "run")
		src := fmt.Sprintf(`
name: view-test
seed: 5
out: %s
steps: 2
method: {name: hacpo}
task: {name: arith, digits: 2, operators: "+-"}
batch: {prompts_per_step: 2, responses_per_prompt: 2, mini_batch: 4}
backend: go:ops_sequential
rollouts: {every: 1}
eval: {sets: [{name: test, split: test, problems: 4, samples: 2}]}
agents:
  - {name: gpt-char, checkpoint: %s/gpt-char, optimizer: {lr: 0.0001}, sampling: {max_new_tokens: 40}}
  - {name: llama-bpe, checkpoint: %s/llama-bpe, template: {kind: chat}, optimizer: {lr: 0.0001}, sampling: {max_new_tokens: 32}}
`, out, agents, agents)
		cfg, err := config.Parse([]byte(src))
		if err != nil {
			runErr = err
			return
		}
		r, err := train.New(context.Background(), cfg, train.Options{})
		if err != nil {
			runErr = err
			return
		}
		if _, err := r.Train(context.Background()); err != nil {
			runErr = err
			return
		}
		runDir = out
	})
	if runErr != nil {
		t.Fatal(runErr)
	}
	return runDir
}

// copyRun copies the files of the real run the view reads into a new
// directory: metrics.jsonl, config.yaml and the rollout logs.
func copyRun(t *testing.T) string {
	t.Helper()
	src := realRun(t)
	dst := filepath.Join(t.TempDir(), "run")
	for _, name := range []string{metrics.FileName, "config.yaml", "rollouts/" + filepath.Base(rollout.LogPath("", 1)), "rollouts/" + filepath.Base(rollout.LogPath("", 2))} {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// startView serves cfg with its pollers running until the test ends.
func startView(t *testing.T, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Watch(ctx) }()
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		cancel()
		<-done
		ts.Close()
	})
	return s, ts
}

// get fetches path and decodes the JSON answer into v, failing unless the
// status is want.
func get(t *testing.T, ts *httptest.Server, path string, want int, v any) {
	t.Helper()
	resp, err := ts.Client().Get(ts.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != want {
		t.Fatalf("GET %s: status %d, want %d: %s", path, resp.StatusCode, want, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("GET %s: Content-Type %q", path, ct)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, body)
	}
}

// apiRecord is a record of /api/metrics; a null value decodes as nil.
type apiRecord struct {
	Step   int                 `json:"step"`
	Agent  string              `json:"agent"`
	Time   float64             `json:"time"`
	Values map[string]*float64 `json:"values"`
}

type metricsAnswer struct {
	Offset  int64       `json:"offset"`
	Gen     int         `json:"gen"`
	Reset   bool        `json:"reset"`
	Records []apiRecord `json:"records"`
}

// asMetrics turns API records into metrics.Records (null: NaN).
func asMetrics(recs []apiRecord) []metrics.Record {
	out := make([]metrics.Record, len(recs))
	for i, r := range recs {
		v := map[string]float64{}
		for k, x := range r.Values {
			v[k] = math.NaN()
			if x != nil {
				v[k] = *x
			}
		}
		out[i] = metrics.Record{Step: r.Step, Agent: r.Agent, Time: r.Time, Values: v}
	}
	return out
}

// sameRecords compares records, NaN equal to NaN.
func sameRecords(t *testing.T, got, want []metrics.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		same := g.Step == w.Step && g.Agent == w.Agent && g.Time == w.Time && len(g.Values) == len(w.Values)
		for k, x := range w.Values {
			y, ok := g.Values[k]
			same = same && ok && (x == y || math.IsNaN(x) && math.IsNaN(y))
		}
		if !same {
			t.Fatalf("record %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
}

// readAll reads /api/metrics of run 0 from offset until an answer adds
// nothing, and returns the records and the final offset.
func readAll(t *testing.T, ts *httptest.Server, offset int64) ([]apiRecord, int64, int) {
	t.Helper()
	var recs []apiRecord
	calls := 0
	for {
		var a metricsAnswer
		get(t, ts, fmt.Sprintf("/api/metrics?run=0&offset=%d", offset), http.StatusOK, &a)
		calls++
		if a.Reset {
			t.Fatalf("reset at offset %d of an unchanged file", offset)
		}
		if a.Offset == offset {
			if len(a.Records) > 0 {
				t.Fatalf("offset %d: %d records but no progress", offset, len(a.Records))
			}
			return recs, offset, calls
		}
		recs = append(recs, a.Records...)
		offset = a.Offset
	}
}

func TestRoutesAnswerWhatTheFilesHold(t *testing.T) {
	dir := realRun(t)
	// Small chunks: the file (about 10 kB) comes in many answers.
	_, ts := startView(t, Config{Runs: []string{dir}, MaxChunk: 1500})

	var runs struct{ Runs []runInfo }
	get(t, ts, "/api/runs", http.StatusOK, &runs)
	want := []runInfo{{ID: "0", Dir: dir, Name: "view-test", Agents: []string{"gpt-char", "llama-bpe"}, Method: "hacpo", Steps: 2, LastStep: 2, Done: true}}
	if !reflect.DeepEqual(runs.Runs, want) {
		t.Errorf("/api/runs: %+v\nwant %+v", runs.Runs, want)
	}

	file, err := metrics.ReadFile(filepath.Join(dir, metrics.FileName))
	if err != nil {
		t.Fatal(err)
	}
	recs, end, calls := readAll(t, ts, 0)
	st, err := os.Stat(filepath.Join(dir, metrics.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if end != st.Size() || calls < 4 {
		t.Errorf("read to offset %d in %d answers; the file has %d bytes (want several answers of at most 1500)", end, calls, st.Size())
	}
	sameRecords(t, asMetrics(recs), file)
	if !slices.ContainsFunc(file, func(r metrics.Record) bool { _, ok := r.Values["eval/test/greedy_acc"]; return ok }) {
		t.Error("the run has no evaluation records")
	}

	var steps struct{ Steps []int }
	get(t, ts, "/api/rollouts?run=0", http.StatusOK, &steps)
	logged, err := rollout.LogSteps(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(steps.Steps, logged) || !reflect.DeepEqual(logged, []int{1, 2}) {
		t.Errorf("/api/rollouts: %v, the run logged %v (want [1 2])", steps.Steps, logged)
	}
	for _, step := range logged {
		var got struct {
			Step    int
			Records []rollout.Record
		}
		get(t, ts, fmt.Sprintf("/api/rollouts/%d?run=0", step), http.StatusOK, &got)
		want, err := rollout.ReadLog(rollout.LogPath(dir, step))
		if err != nil {
			t.Fatal(err)
		}
		if got.Step != step || !reflect.DeepEqual(got.Records, want) {
			t.Errorf("/api/rollouts/%d: step %d, %d records\n%+v\nwant %d\n%+v", step, got.Step, len(got.Records), got.Records, len(want), want)
		}
		if len(want) != 2*2*2 || len(want[0].Learners) != 2 {
			t.Errorf("step %d's log has %d records (want 2 agents × 2 prompts × 2 responses), each with %d learners", step, len(want), len(want[0].Learners))
		}
	}
}

// appendFile appends data to path.
func appendFile(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestMetricsOffsets(t *testing.T) {
	dir := copyRun(t)
	path := filepath.Join(dir, metrics.FileName)
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	file, err := metrics.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The file as a run writing its fourth line leaves it: three lines and
	// part of the fourth.
	lines := strings.SplitAfter(string(full), "\n")
	three := len(lines[0]) + len(lines[1]) + len(lines[2])
	cut := three + len(lines[3])/2
	if err := os.WriteFile(path, full[:cut], 0o644); err != nil {
		t.Fatal(err)
	}
	_, ts := startView(t, Config{Runs: []string{dir}, Poll: time.Hour})
	recs, off, _ := readAll(t, ts, 0)
	if off != int64(three) {
		t.Fatalf("offset %d after a torn fourth line, want %d (the end of the third)", off, three)
	}
	sameRecords(t, asMetrics(recs), file[:3])

	// The rest of the line, and a record whose values the file holds as null.
	nan := metrics.Record{Step: 3, Agent: "gpt-char", Time: 1.8e9, Values: map[string]float64{"loss/policy": math.NaN(), "reward/mean": math.Inf(1), "x": 0.25}}
	extra := filepath.Join(t.TempDir(), "extra.jsonl")
	if err := metrics.WriteFile(extra, []metrics.Record{nan}); err != nil {
		t.Fatal(err)
	}
	nanLine, err := os.ReadFile(extra)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(nanLine), `"loss/policy":null`) {
		t.Fatalf("metrics writes NaN as %s", nanLine)
	}
	appendFile(t, path, append(full[cut:], nanLine...))
	more, end, _ := readAll(t, ts, off)
	file, err = metrics.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, asMetrics(append(recs, more...)), file)
	if last := more[len(more)-1]; last.Values["loss/policy"] != nil || last.Values["reward/mean"] != nil || *last.Values["x"] != 0.25 {
		t.Errorf("NaN and Inf came as %v and %v, want null", last.Values["loss/policy"], last.Values["reward/mean"])
	}
	if st, _ := os.Stat(path); end != st.Size() {
		t.Errorf("offset %d at the end, the file has %d bytes", end, st.Size())
	}
}

// events reads an event stream, sending each event on the returned channel.
func events(t *testing.T, ts *httptest.Server) <-chan [2]string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, ts.URL+"/api/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("/api/events: status %d, Content-Type %q", resp.StatusCode, ct)
	}
	ch := make(chan [2]string, 100)
	go func() {
		defer resp.Body.Close()
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		var name string
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				name = v
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				ch <- [2]string{name, v}
			}
		}
	}()
	return ch
}

// next waits for the next event, failing after a few seconds.
func next(t *testing.T, ch <-chan [2]string) [2]string {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("the event stream ended")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10 s")
	}
	return [2]string{}
}

func TestLiveUpdates(t *testing.T) {
	dir := copyRun(t)
	path := filepath.Join(dir, metrics.FileName)
	_, ts := startView(t, Config{Runs: []string{dir}, Poll: 20 * time.Millisecond})
	recs, off, _ := readAll(t, ts, 0)
	ch := events(t, ts)

	// A step written as a run writes it, through metrics.Writer.
	w, err := metrics.Open(dir, 2, metrics.WithTensorBoard(false))
	if err != nil {
		t.Fatal(err)
	}
	rec := metrics.Record{Step: 3, Agent: "llama-bpe", Values: map[string]float64{"reward/mean": 0.75}}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, ch); ev != [2]string{"metrics", `{"run":"0"}`} {
		t.Fatalf("event %q, want metrics of run 0", ev)
	}
	more, _, _ := readAll(t, ts, off)
	if len(more) != 1 || more[0].Step != 3 || more[0].Agent != "llama-bpe" || *more[0].Values["reward/mean"] != 0.75 {
		t.Fatalf("after the event: %+v, want the step-3 record", more)
	}
	var runs struct{ Runs []runInfo }
	get(t, ts, "/api/runs", http.StatusOK, &runs)
	if runs.Runs[0].LastStep != 3 || runs.Runs[0].Done {
		t.Errorf("/api/runs after step 3: %+v (want last_step 3, not done: no final checkpoints in the copy)", runs.Runs[0])
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	// A new rollout log.
	logged, err := rollout.ReadLog(rollout.LogPath(dir, 2))
	if err != nil {
		t.Fatal(err)
	}
	for i := range logged {
		logged[i].Step = 3
	}
	if err := rollout.WriteLog(rollout.LogPath(dir, 3), logged[:3]); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, ch); ev != [2]string{"rollouts", `{"run":"0","step":3}`} {
		t.Fatalf("event %q, want rollouts of run 0 step 3", ev)
	}
	var got struct{ Records []rollout.Record }
	get(t, ts, "/api/rollouts/3?run=0", http.StatusOK, &got)
	if !reflect.DeepEqual(got.Records, logged[:3]) {
		t.Errorf("/api/rollouts/3: %+v\nwant %+v", got.Records, logged[:3])
	}
	// The same log written again (the cache keeps a log by size and time).
	if err := rollout.WriteLog(rollout.LogPath(dir, 3), logged[:5]); err != nil {
		t.Fatal(err)
	}
	get(t, ts, "/api/rollouts/3?run=0", http.StatusOK, &got)
	if !reflect.DeepEqual(got.Records, logged[:5]) {
		t.Errorf("/api/rollouts/3 after the log was written again: %d records, want 5", len(got.Records))
	}

	// A resume at step 1 rewrites the file without the later records: the
	// clients start again from 0.
	_, end, _ := readAll(t, ts, 0)
	w, err = metrics.Open(dir, 1, metrics.WithTensorBoard(false))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if ev := next(t, ch); ev != [2]string{"metrics", `{"run":"0","reset":true}`} {
		t.Fatalf("event %q after the resume, want a reset of run 0's metrics", ev)
	}
	var a metricsAnswer
	get(t, ts, fmt.Sprintf("/api/metrics?run=0&offset=%d", end), http.StatusOK, &a)
	file, err := metrics.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Reset || a.Gen != 1 || len(file) == 0 || len(file) >= len(recs) {
		t.Fatalf("the old end offset %d after the resume: reset %v gen %d, %d records; the file has %d (of %d)", end, a.Reset, a.Gen, len(a.Records), len(file), len(recs))
	}
	sameRecords(t, asMetrics(a.Records), file)
	// The file grows again past the old end: a client that names the old gen
	// still starts again.
	for i := 0; i < 40; i++ {
		if err := w.Write(metrics.Record{Step: 2, Agent: "gpt-char", Values: map[string]float64{"reward/mean": float64(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	var b metricsAnswer
	get(t, ts, fmt.Sprintf("/api/metrics?run=0&offset=%d&gen=0", a.Offset), http.StatusOK, &b)
	if !b.Reset || b.Gen != 1 || len(b.Records) != len(file)+40 {
		t.Errorf("gen 0 after the rewrite: reset %v gen %d, %d records, want a reset with %d", b.Reset, b.Gen, len(b.Records), len(file)+40)
	}
	get(t, ts, fmt.Sprintf("/api/metrics?run=0&offset=%d&gen=1", a.Offset), http.StatusOK, &b)
	if b.Reset || len(b.Records) != 40 {
		t.Errorf("gen 1 from offset %d: reset %v, %d records, want the 40 new", a.Offset, b.Reset, len(b.Records))
	}

	// Removed logs (a resume prunes them).
	if err := rollout.PruneLogs(dir, 1); err != nil {
		t.Fatal(err)
	}
	for {
		ev := next(t, ch)
		if ev[0] == "rollouts" {
			if ev[1] != `{"run":"0","reset":true}` {
				t.Fatalf("event %q after pruning, want a reset of run 0's rollouts", ev)
			}
			break
		}
	}
}

func TestBadRequests(t *testing.T) {
	dir := realRun(t)
	_, ts := startView(t, Config{Runs: []string{dir, dir}})
	st, err := os.Stat(filepath.Join(dir, metrics.FileName))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path   string
		status int
		want   string
	}{
		{"/api/metrics?run=2", 400, `run "2": no such run; the ids are 0 to 1`},
		{"/api/metrics", 400, "missing run: want ?run=ID"},
		{"/api/rollouts?run=x", 400, `run "x": no such run`},
		{"/api/metrics?run=0&offset=-1", 400, `offset "-1": want a byte offset`},
		{"/api/metrics?run=0&offset=ten", 400, `offset "ten": want a byte offset`},
		{fmt.Sprintf("/api/metrics?run=0&offset=%d", st.Size()+1), 400, fmt.Sprintf("offset %d is beyond the end of %s (%d bytes)", st.Size()+1, filepath.Join(dir, metrics.FileName), st.Size())},
		{"/api/metrics?run=0&offset=5", 400, "offset 5 is not at the start of a line of " + filepath.Join(dir, metrics.FileName)},
		{"/api/metrics?run=0&gen=x", 400, `gen "x": want the gen of an earlier answer`},
		{"/api/rollouts/7?run=1", 400, "step 7 of run 1 is not logged; logged steps: 1, 2"},
		{"/api/rollouts/0?run=0", 400, `step "0": want a logged step, an integer >= 1`},
		{"/api/rollouts/two?run=0", 400, `step "two": want a logged step`},
		{"/api/rollouts/1", 400, "missing run"},
		{"/api/nothing", 404, "no route /api/nothing"},
		{"/nothing", 404, "no page /nothing"},
	} {
		var e struct{ Error string }
		get(t, ts, c.path, c.status, &e)
		if !strings.Contains(e.Error, c.want) {
			t.Errorf("GET %s: error %q, want it to contain %q", c.path, e.Error, c.want)
		}
	}
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		req, _ := http.NewRequest(method, ts.URL+"/api/runs", strings.NewReader("{}"))
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(string(body), "read-only") {
			t.Errorf("%s /api/runs: %d %s, want 405", method, resp.StatusCode, body)
		}
	}
}

func TestNewRefusesWhatIsNotARun(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	waiting := filepath.Join(dir, "waiting")
	if err := os.Mkdir(waiting, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(waiting, "config.yaml"), []byte("name: later\nsteps: 5\nmethod: {name: gspo}\nagents: [{name: a}, {name: b}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "no run directory given"},
		{Config{Runs: []string{empty}}, empty + " is not a run directory: it has no metrics.jsonl, metrics.jsonl.gz, config.yaml or cell.yaml"},
		{Config{Runs: []string{filepath.Join(dir, "gone")}}, "no such file or directory"},
		{Config{Runs: []string{filepath.Join(waiting, "config.yaml")}}, "is not a directory"},
		{Config{Runs: []string{waiting}, Key: "a key"}, `the key has ' ' at byte 1`},
	} {
		if _, err := New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v): %v, want an error with %q", c.cfg, err, c.want)
		}
	}
	// A run that has written no metrics yet is served, and appears once it has.
	_, ts := startView(t, Config{Runs: []string{waiting}, Poll: 20 * time.Millisecond})
	var runs struct{ Runs []runInfo }
	get(t, ts, "/api/runs", http.StatusOK, &runs)
	want := runInfo{ID: "0", Dir: waiting, Name: "later", Agents: []string{"a", "b"}, Method: "gspo", Steps: 5}
	if !reflect.DeepEqual(runs.Runs, []runInfo{want}) {
		t.Errorf("/api/runs: %+v, want %+v", runs.Runs, want)
	}
	var a metricsAnswer
	get(t, ts, "/api/metrics?run=0&offset=0", http.StatusOK, &a)
	if a.Offset != 0 || len(a.Records) != 0 {
		t.Errorf("metrics of a run without metrics.jsonl: %+v", a)
	}
	ch := events(t, ts)
	if err := metrics.WriteFile(filepath.Join(waiting, metrics.FileName), []metrics.Record{{Step: 1, Agent: "b", Time: 1, Values: map[string]float64{"r": 1}}}); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, ch); ev != [2]string{"metrics", `{"run":"0"}`} {
		t.Errorf("event %q, want metrics", ev)
	}
	get(t, ts, "/api/metrics?run=0&offset=0", http.StatusOK, &a)
	if len(a.Records) != 1 || a.Records[0].Agent != "b" {
		t.Errorf("after the first write: %+v", a)
	}
}

// TestArchivedCell serves an experiment's archived cell, as
// docs/results/*/cells hold them: metrics.jsonl.gz, cell.yaml, done.json.
func TestArchivedCell(t *testing.T) {
	cell := "../docs/results/options/cells/main/hacpo/seed1"
	_, ts := startView(t, Config{Runs: []string{cell}, MaxChunk: 64 << 10})
	var runs struct{ Runs []runInfo }
	get(t, ts, "/api/runs", http.StatusOK, &runs)
	want := runInfo{ID: "0", Dir: cell, Name: "options/main/hacpo/seed1", Agents: []string{"gpt-char", "llama-bpe"}, Method: "hacpo", Steps: 50, LastStep: 50, Done: true}
	if !reflect.DeepEqual(runs.Runs, []runInfo{want}) {
		t.Errorf("/api/runs: %+v, want %+v", runs.Runs, want)
	}
	file, err := metrics.ReadFile(filepath.Join(cell, "metrics.jsonl.gz"))
	if err != nil {
		t.Fatal(err)
	}
	recs, _, calls := readAll(t, ts, 0)
	sameRecords(t, asMetrics(recs), file)
	if calls < 3 {
		t.Errorf("%d answers of at most 64 KiB", calls)
	}
}

func TestKey(t *testing.T) {
	dir := realRun(t)
	const key = "s3cret-Key_0123456789"
	_, ts := startView(t, Config{Runs: []string{dir}, Key: key})
	asset, err := fsFirstAsset()
	if err != nil {
		t.Fatal(err)
	}
	routes := []string{"/", "/assets/" + asset, "/api/runs", "/api/metrics?run=0", "/api/rollouts?run=0", "/api/rollouts/1?run=0", "/api/events", "/api/nothing"}
	do := func(path string, set func(*http.Request)) *http.Response {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+path, nil)
		set(req)
		c := *ts.Client()
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	for _, path := range routes {
		for name, set := range map[string]func(*http.Request){
			"no key":        func(*http.Request) {},
			"wrong bearer":  func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+key+"x") },
			"a prefix":      func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+key[:5]) },
			"not bearer":    func(r *http.Request) { r.Header.Set("Authorization", key) },
			"wrong cookie":  func(r *http.Request) { r.AddCookie(&http.Cookie{Name: CookieName, Value: "s3cret"}) },
			"other cookie":  func(r *http.Request) { r.AddCookie(&http.Cookie{Name: "key", Value: key}) },
			"key for /only": func(r *http.Request) { r.URL.RawQuery += "&key=" + key },
		} {
			if name == "key for /only" && path == "/" {
				continue
			}
			resp := do(path, set)
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "key: send Authorization: Bearer KEY") {
				t.Errorf("GET %s with %s: %d %s, want 401", path, name, resp.StatusCode, body)
			}
		}
		for name, set := range map[string]func(*http.Request){
			"bearer": func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+key) },
			"cookie": func(r *http.Request) { r.AddCookie(&http.Cookie{Name: CookieName, Value: key}) },
		} {
			want := http.StatusOK
			if path == "/api/nothing" {
				want = http.StatusNotFound
			}
			if resp := do(path, set); resp.StatusCode != want {
				t.Errorf("GET %s with the key as %s: %d, want %d", path, name, resp.StatusCode, want)
			}
		}
	}
	// The page's first load with ?key= sets the cookie and leaves the key
	// out of the address; a wrong one does neither.
	if resp := do("/?key=wrong", func(*http.Request) {}); resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Errorf("/?key=wrong: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	resp := do("/?key="+key, func(*http.Request) {})
	cookies := resp.Cookies()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" || len(cookies) != 1 {
		t.Fatalf("/?key=KEY: %d to %q, cookies %v; want 303 to / with one cookie", resp.StatusCode, resp.Header.Get("Location"), cookies)
	}
	c := cookies[0]
	if c.Name != CookieName || c.Value != key || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" {
		t.Errorf("cookie %+v, want %s=KEY, HttpOnly, SameSite=Strict, Path /", c, CookieName)
	}
	if resp := do("/api/events", func(r *http.Request) { r.AddCookie(c) }); resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("/api/events with the cookie: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// fsFirstAsset names a file of the embedded assets.
func fsFirstAsset() (string, error) {
	ents, err := assets.ReadDir("assets")
	if err != nil {
		return "", err
	}
	for _, e := range ents {
		if !e.IsDir() && e.Name() != "index.html" {
			return e.Name(), nil
		}
	}
	return "index.html", nil
}

func TestLoopbackOnlyWithoutKey(t *testing.T) {
	for _, c := range []struct {
		addr, key string
		ok        bool
	}{
		{DefaultAddr, "", true},
		{"localhost:8080", "", true},
		{"127.0.0.2:1", "", true},
		{"[::1]:8080", "", true},
		{"0.0.0.0:8080", "", false},
		{":8080", "", false},
		{"[::]:8080", "", false},
		{"192.168.1.5:8080", "", false},
		{"example.org:8080", "", false},
		{"0.0.0.0:8080", "k", true},
	} {
		err := CheckAddr(c.addr, c.key)
		if c.ok != (err == nil) || err != nil && (!errors.Is(err, ErrNeedKey) || !strings.Contains(err.Error(), "--key KEY or $HACRL_VIEW_KEY")) {
			t.Errorf("CheckAddr(%q, %q): %v", c.addr, c.key, err)
		}
	}
	if host, _, _ := net.SplitHostPort(DefaultAddr); !IsLoopback(host) {
		t.Errorf("DefaultAddr %s is not loopback", DefaultAddr)
	}

	// Serve refuses a listener on every interface without a key.
	s, err := New(Config{Runs: []string{realRun(t)}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := s.Serve(t.Context(), l); !errors.Is(err, ErrNeedKey) {
		t.Errorf("Serve on %s without a key: %v, want ErrNeedKey", l.Addr(), err)
	}

	// Without a key, a request addressed to another host is refused (DNS
	// rebinding: a page of evil.example whose name points at 127.0.0.1).
	_, ts := startView(t, Config{Runs: []string{realRun(t)}})
	for host, want := range map[string]int{"evil.example:8080": 403, "evil.example": 403, "localhost:8080": 200, "127.0.0.1": 200, "[::1]:80": 200} {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+"/api/runs", nil)
		req.Host = host
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
}

// TestKeyCompareConstantTime times wrong keys that differ from a 1 MiB key
// at its first and at its last byte: a comparison that stops at the first
// difference takes about a million times longer on the second.
func TestKeyCompareConstantTime(t *testing.T) {
	key := strings.Repeat("k", 1<<20)
	s := &Server{cfg: Config{Key: key}}
	s.keyHash = hashKey(key)
	first := "x" + key[1:]
	last := key[:len(key)-1] + "x"
	// Alternate the two, so that a change in the machine's load hits both.
	var ta, tb []time.Duration
	for range 21 {
		for _, c := range []struct {
			got string
			ds  *[]time.Duration
		}{{first, &ta}, {last, &tb}} {
			t0 := time.Now()
			if s.keyMatches(c.got) {
				t.Fatal("a wrong key matches")
			}
			*c.ds = append(*c.ds, time.Since(t0))
		}
	}
	median := func(ds []time.Duration) time.Duration {
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	a, b := median(ta), median(tb)
	if r := float64(b) / float64(a); r > 3 || r < 1.0/3 {
		t.Errorf("a wrong first byte takes %v, a wrong last byte %v: the time depends on where the keys differ", a, b)
	}
	if !s.keyMatches(key) {
		t.Error("the key does not match itself")
	}
}

// TestSlowClientDropped: a client that does not read is dropped once its
// queue is full, and the others go on.
func TestSlowClientDropped(t *testing.T) {
	h := newHub(2)
	slow, quick := h.subscribe(), h.subscribe()
	for i := range 5 {
		h.publish(event{"metrics", []byte(fmt.Sprint(i))})
		if ev := <-quick; string(ev.data) != fmt.Sprint(i) {
			t.Fatalf("event %d came as %s", i, ev.data)
		}
	}
	for i := range 2 {
		if ev, ok := <-slow; !ok || string(ev.data) != fmt.Sprint(i) {
			t.Fatalf("the slow client's event %d: %s %v", i, ev.data, ok)
		}
	}
	select {
	case _, ok := <-slow:
		if ok {
			t.Error("the slow client got an event its full queue had no room for")
		}
	case <-time.After(time.Second):
		t.Error("a client whose queue was full was not dropped (its channel is still open)")
	}
	if n := h.len(); n != 1 {
		t.Errorf("%d clients left, want the one that reads", n)
	}
	h.close()
	if _, ok := <-quick; ok || h.subscribe() != nil {
		t.Error("a closed hub keeps its clients or takes new ones")
	}
}

func TestStopsCleanly(t *testing.T) {
	dir := realRun(t)
	before := runtime.NumGoroutine()
	s, err := New(Config{Runs: []string{dir, dir}, Poll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, l) }()
	url := "http://" + l.Addr().String()
	client := &http.Client{Transport: &http.Transport{}}
	// Two event streams: one read, one never read after its headers.
	var bodies []io.ReadCloser
	for range 2 {
		resp, err := client.Get(url + "/api/events")
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, resp.Body)
	}
	for s.hub.len() != 2 {
		time.Sleep(time.Millisecond)
	}
	// Both streams are open and idle: the stop has to end them.
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return within 10 s of the cancel")
	}
	for _, b := range bodies {
		io.Copy(io.Discard, b) // the streams have ended
		b.Close()
	}
	client.CloseIdleConnections()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after Serve returned, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}
