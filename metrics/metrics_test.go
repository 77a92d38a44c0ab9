package metrics

import (
	"bytes"
	"fmt"
	"github.com/hacrl/hacrl/internal/mounttest"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// runRecords returns the deterministic records of a small run: per step, one
// record per agent and one run-wide record.
func runRecords(step int) []Record {
	t := 1_700_000_000 + float64(step)
	return []Record{
		{Step: step, Agent: "qwen-0.5b", Time: t, Values: map[string]float64{"reward/mean": 0.1 * float64(step), "loss/policy": -0.01 * float64(step), "eval/test/greedy_acc": 0.5}},
		{Step: step, Agent: "llama/1b", Time: t, Values: map[string]float64{"reward/mean": 0.2 * float64(step), "omega/qwen-0.5b": 0.75}},
		{Step: step, Time: t, Values: map[string]float64{"time/step_s": 1.25}},
	}
}

func writeSteps(t *testing.T, w *Writer, from, to int) {
	t.Helper()
	for s := from; s <= to; s++ {
		for _, r := range runRecords(s) {
			if err := w.Write(r); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestLineFormat(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, Fresh, WithTensorBoard(false))
	if err != nil {
		t.Fatal(err)
	}
	recs := []Record{
		{Step: 3, Agent: "a", Time: 1.5, Values: map[string]float64{"reward/mean": 0.5, "loss/policy": -0.25, "acc": 1}},
		{Step: 4, Agent: "", Time: 2, Values: map[string]float64{"nan": math.NaN(), "inf": math.Inf(-1), "tiny": 1e-300}},
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, FileName))
	want := `{"step":3,"agent":"a","time":1.5,"acc":1,"loss/policy":-0.25,"reward/mean":0.5}` + "\n" +
		`{"step":4,"agent":"","time":2,"inf":null,"nan":null,"tiny":1e-300}` + "\n"
	if string(got) != want {
		t.Errorf("metrics.jsonl:\n got %s\nwant %s", got, want)
	}
	back, err := ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != 2 || !reflect.DeepEqual(back[0], recs[0]) {
		t.Fatalf("ReadFile = %+v, want %+v first", back, recs[0])
	}
	if v := back[1].Values; !math.IsNaN(v["nan"]) || !math.IsNaN(v["inf"]) || v["tiny"] != 1e-300 || back[1].Step != 4 || back[1].Time != 2 {
		t.Errorf("second record = %+v, want NaN, NaN (null), 1e-300", back[1])
	}
	if _, err := os.Stat(filepath.Join(dir, "tb")); !os.IsNotExist(err) {
		t.Error("WithTensorBoard(false) still created tb/")
	}
}

func TestResumeMatchesUninterruptedRun(t *testing.T) {
	whole := t.TempDir()
	w, err := Open(whole, Fresh, WithHost("h"))
	if err != nil {
		t.Fatal(err)
	}
	writeSteps(t, w, 0, 9)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	resumed := t.TempDir()
	w, err = Open(resumed, Fresh, WithHost("h"))
	if err != nil {
		t.Fatal(err)
	}
	writeSteps(t, w, 0, 6)
	w.Close()
	// A crash mid-write leaves a partial line; the checkpoint was at step 4.
	f, _ := os.OpenFile(filepath.Join(resumed, FileName), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"step":7,"agent":"qw`)
	f.Close()
	w, err = Open(resumed, 4, WithHost("h"))
	if err != nil {
		t.Fatal(err)
	}
	writeSteps(t, w, 5, 9)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	a, _ := os.ReadFile(filepath.Join(whole, FileName))
	b, _ := os.ReadFile(filepath.Join(resumed, FileName))
	if !bytes.Equal(a, b) || len(a) == 0 {
		t.Errorf("resumed metrics.jsonl differs from the uninterrupted one:\n%s\nvs\n%s", b, a)
	}
	for _, run := range []string{"qwen-0.5b", "llama_1b", "run"} {
		wantEv := runEvents(t, filepath.Join(whole, "tb", run))
		gotEv := runEvents(t, filepath.Join(resumed, "tb", run))
		if len(wantEv) != 10 || !reflect.DeepEqual(gotEv, wantEv) {
			t.Errorf("tb/%s: resumed events (%d) differ from the uninterrupted run's (%d)", run, len(gotEv), len(wantEv))
		}
	}
}

// runEvents returns the scalar events of every event file in dir, in file
// name order, without the file_version events.
func runEvents(t *testing.T, dir string) []Event {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, eventFilePrefix+"*"))
	var out []Event
	for _, p := range paths {
		evs, err := ReadEvents(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 || evs[0].FileVersion != fileVersion {
			t.Fatalf("%s does not start with a file_version event", p)
		}
		out = append(out, evs[1:]...)
	}
	return out
}

func TestFreshDiscardsOldMetrics(t *testing.T) {
	dir := t.TempDir()
	w, _ := Open(dir, Fresh, WithHost("h"))
	writeSteps(t, w, 0, 2)
	w.Close()
	w, err := Open(dir, Fresh, WithHost("h"))
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if data, _ := os.ReadFile(filepath.Join(dir, FileName)); len(data) != 0 {
		t.Errorf("fresh Open kept %d bytes of metrics", len(data))
	}
	if paths, _ := filepath.Glob(filepath.Join(dir, "tb", "*", eventFilePrefix+"*")); len(paths) != 0 {
		t.Errorf("fresh Open kept event files %v", paths)
	}
}

func TestWriteErrors(t *testing.T) {
	w, err := Open(t.TempDir(), Fresh, WithTensorBoard(false))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		rec  Record
		want string
	}{
		{Record{Step: -1, Agent: "a"}, `agent "a": step -1 is negative`},
		{Record{Step: 1, Agent: "a", Values: map[string]float64{"step": 1}}, `invalid metric key "step"`},
		{Record{Step: 1, Values: map[string]float64{"": 1}}, `invalid metric key ""`},
	}
	for _, tc := range tests {
		if err := w.Write(tc.rec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Write(%+v) error = %v, want %q", tc.rec, err, tc.want)
		}
	}
	w.Close()
	if err := w.Write(Record{Step: 1}); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Write after Close error = %v, want 'closed'", err)
	}
}

func TestReadFileErrors(t *testing.T) {
	good := `{"step":1,"agent":"a","time":1,"x":2}`
	tests := []struct {
		name, body, want string
	}{
		{"bad json", good + "\n{\"step\":2,\n", ":2: want a JSON object"},
		{"missing step", good + "\n\n" + `{"agent":"a"}`, `:3: missing "step"`},
		{"fractional step", `{"step":1.5}`, `:1: "step" = 1.5: want a non-negative integer`},
		{"string value", `{"step":1,"x":"high"}`, `:1: "x" = "high": want a number or null`},
		{"numeric agent", `{"step":1,"agent":7}`, `:1: "agent" = 7: want a string`},
	}
	dir := t.TempDir()
	for _, tc := range tests {
		path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".jsonl")
		os.WriteFile(path, []byte(tc.body), 0o644)
		_, err := ReadFile(path)
		if err == nil || !strings.Contains(err.Error(), path+tc.want) {
			t.Errorf("%s: ReadFile error = %v, want %q", tc.name, err, path+tc.want)
		}
	}
	if _, err := ReadFile(filepath.Join(dir, "absent.jsonl")); !os.IsNotExist(unwrapAll(err)) {
		t.Errorf("missing file error = %v, want not-exist", err)
	}
	// Resuming over a corrupt line in the middle is refused, naming the line.
	os.WriteFile(filepath.Join(dir, FileName), []byte(good+"\nnot json\n"+good+"\n"), 0o644)
	if _, err := Open(dir, 1); err == nil || !strings.Contains(err.Error(), FileName+":2:") {
		t.Errorf("Open over a corrupt file: error = %v, want one naming line 2", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

func TestConcurrentWrites(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, Fresh, WithHost("h"))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for s := range 25 {
				w.Write(Record{Step: s, Agent: string(rune('a' + g)), Time: 1, Values: map[string]float64{"v": float64(s)}})
			}
		})
	}
	wg.Wait()
	w.Close()
	recs, err := ReadFile(filepath.Join(dir, FileName))
	if err != nil || len(recs) != 100 {
		t.Fatalf("read %d records (%v), want 100", len(recs), err)
	}
	if got := Agents(recs); !reflect.DeepEqual(got, []string{"a", "b", "c", "d"}) {
		t.Errorf("Agents = %v", got)
	}
	for _, a := range []string{"a", "b", "c", "d"} {
		if evs := runEvents(t, filepath.Join(dir, "tb", a)); len(evs) != 25 {
			t.Errorf("tb/%s has %d events, want 25", a, len(evs))
		}
	}
}

func TestTensorBoardRun(t *testing.T) {
	for agent, want := range map[string]string{"": "run", "Qwen2.5-0.5B": "Qwen2.5-0.5B", "org/model x": "org_model_x", "..": "_"} {
		if got := TensorBoardRun(agent); got != want {
			t.Errorf("TensorBoardRun(%q) = %q, want %q", agent, got, want)
		}
	}
}

func TestWriteCSV(t *testing.T) {
	recs := []Record{
		{Step: 0, Agent: "a", Time: 10, Values: map[string]float64{"y": 1, "x": 0.5}},
		{Step: 1, Agent: "b,c", Time: 11.5, Values: map[string]float64{"z": math.NaN()}},
	}
	var buf bytes.Buffer
	if err := WriteCSV(&buf, recs); err != nil {
		t.Fatal(err)
	}
	want := "step,agent,time,x,y,z\n0,a,10,0.5,1,\n1,\"b,c\",11.5,,,NaN\n"
	if buf.String() != want {
		t.Errorf("CSV:\n got %q\nwant %q", buf.String(), want)
	}
}

func TestWriteGzipReadsBack(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, FileName)
	recs := []Record{
		{Step: 0, Agent: "a", Time: 1, Values: map[string]float64{"eval/test/greedy_acc": 0.25}},
		{Step: 1, Agent: "b", Time: 2, Values: map[string]float64{"reward/mean": 0.5, "omega/a": math.NaN()}},
	}
	if err := WriteFile(src, recs); err != nil {
		t.Fatal(err)
	}
	gz := filepath.Join(dir, "archived.jsonl.gz")
	if err := WriteGzip(gz, src); err != nil {
		t.Fatal(err)
	}
	plain, err := ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ReadFile(gz)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != 2 || back[0].Values["eval/test/greedy_acc"] != 0.25 || !math.IsNaN(back[1].Values["omega/a"]) ||
		back[1].Agent != "b" || len(plain) != len(back) {
		t.Errorf("gzipped metrics read back as %+v, want %+v", back, plain)
	}
	// The same input gives the same bytes: an archive churns only with its data.
	first, _ := os.ReadFile(gz)
	if err := WriteGzip(gz, src); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(gz); !bytes.Equal(first, again) {
		t.Error("WriteGzip of the same file gave different bytes")
	}
	// A cut-off archive is an error naming the file, not a short read.
	cut := filepath.Join(dir, "cut.jsonl.gz")
	os.WriteFile(cut, first[:len(first)-6], 0o644)
	if _, err := ReadFile(cut); err == nil || !strings.Contains(err.Error(), cut) {
		t.Errorf("truncated gzip: error = %v, want one naming %s", err, cut)
	}
}

func TestReadFileTornLastLine(t *testing.T) {
	good := `{"step":1,"agent":"a","time":1,"x":2}` + "\n"
	tests := []struct {
		name, body string
		recs       int
		tornLine   int // 0: not torn
	}{
		{"cut inside a number", good + `{"step":2,"agent":"a","ti`, 1, 2},
		{"cut before the brace", good + good + `{"step":3,"x":1`, 2, 3},
		{"whole last record without newline", good + `{"step":2,"x":1}`, 2, 0},
		{"only a torn line", `{"st`, 0, 1},
	}
	dir := t.TempDir()
	for _, tc := range tests {
		path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".jsonl")
		os.WriteFile(path, []byte(tc.body), 0o644)
		recs, err := ReadFile(path)
		torn := Torn(err)
		switch {
		case tc.tornLine == 0 && err != nil:
			t.Errorf("%s: error %v, want none", tc.name, err)
		case tc.tornLine > 0 && (torn == nil || torn.Line != tc.tornLine || torn.Path != path):
			t.Errorf("%s: error %v, want a TornError at %s:%d", tc.name, err, path, tc.tornLine)
		case tc.tornLine > 0 && !strings.Contains(err.Error(), "it is skipped"):
			t.Errorf("%s: error %q does not say the line is skipped", tc.name, err)
		}
		if len(recs) != tc.recs {
			t.Errorf("%s: %d records, want the %d whole ones", tc.name, len(recs), tc.recs)
		}
	}
	// A bad line that is not the last is an error of the file, not a tear.
	path := filepath.Join(dir, "middle.jsonl")
	os.WriteFile(path, []byte(good+`{"st`+"\n"+good), 0o644)
	if _, err := ReadFile(path); err == nil || Torn(err) != nil || !strings.Contains(err.Error(), path+":2:") {
		t.Errorf("bad middle line: error %v, want a plain error naming line 2", err)
	}
}

// TestFullDiskLeavesWholeRecords fills a small file system (a tmpfs of 64
// KiB, mounted for the test: root only) with records until a write fails,
// and checks that the file still ends with a whole record: the part of the
// failed record that reached the disk was cut off again.
func TestFullDiskLeavesWholeRecords(t *testing.T) {
	dir := mounttest.Small(t, 64<<10)
	w, err := Open(dir, Fresh, WithTensorBoard(false))
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]float64{}
	for i := range 40 {
		values[fmt.Sprintf("metric/with_a_long_name_%02d", i)] = float64(i) / 3
	}
	written := 0
	for ; written < 10000; written++ {
		if err := w.Write(Record{Step: written + 1, Agent: "a", Time: 1, Values: values}); err != nil {
			if !strings.Contains(err.Error(), "no space left") {
				t.Fatalf("write %d: %v, want a full disk", written+1, err)
			}
			break
		}
	}
	if written == 0 || written == 10000 {
		t.Fatalf("%d records written before the disk was full", written)
	}
	w.Close()
	recs, err := ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatalf("after a full disk: %v", err)
	}
	if len(recs) != written {
		t.Fatalf("%d records read back, want the %d written", len(recs), written)
	}
}

func TestOfAgent(t *testing.T) {
	recs := []Record{{Step: 1, Agent: "a"}, {Step: 1}, {Step: 1, Agent: "b"}, {Step: 2, Agent: "a"}}
	for _, tc := range []struct {
		agent string
		steps []int
	}{{"a", []int{1, 2}}, {"", []int{1}}, {"b", []int{1}}, {"c", nil}} {
		var steps []int
		for _, r := range OfAgent(recs, tc.agent) {
			if r.Agent != tc.agent {
				t.Errorf("OfAgent(%q) returned a record of %q", tc.agent, r.Agent)
			}
			steps = append(steps, r.Step)
		}
		if !reflect.DeepEqual(steps, tc.steps) {
			t.Errorf("OfAgent(%q): steps %v, want %v", tc.agent, steps, tc.steps)
		}
	}
}
