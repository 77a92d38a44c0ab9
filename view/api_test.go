package view

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/metrics"
)

// checkLine holds appendLine to metrics.ParseLine: when the fast path takes
// a line, its output is JSON that decodes to the record ParseLine reads
// (null for NaN), and ParseLine accepts the line.
func checkLine(t *testing.T, line string) (fast bool) {
	t.Helper()
	got, ok := appendLine([]byte("x"), []byte(line))
	if !ok {
		if string(got) != "x" {
			t.Errorf("%q: left to ParseLine, but appendLine wrote %q", line, got)
		}
		return false
	}
	want, err := metrics.ParseLine([]byte(line))
	if err != nil {
		t.Fatalf("%q: appendLine took a line ParseLine refuses: %v", line, err)
	}
	var rec apiRecord
	if err := json.Unmarshal(got[1:], &rec); err != nil {
		t.Fatalf("%q: appendLine wrote %s, not JSON: %v", line, got[1:], err)
	}
	r := asMetrics([]apiRecord{rec})[0]
	same := r.Step == want.Step && r.Agent == want.Agent && r.Time == want.Time && len(r.Values) == len(want.Values)
	for k, x := range want.Values {
		y, ok := r.Values[k]
		same = same && ok && (x == y || math.IsNaN(x) && math.IsNaN(y))
	}
	if !same {
		t.Errorf("%q: appendLine gives %+v, ParseLine %+v", line, r, want)
	}
	return true
}

func TestAppendLineMatchesParseLine(t *testing.T) {
	for _, c := range []struct {
		line string
		fast bool
	}{
		{`{"step":3,"agent":"gpt-char","time":1790000000.123,"accuracy/train":0.5,"loss/kl":null,"x":-1.5e-07}` + "\n", true},
		{`{"step":0,"agent":"","time":1.79e+09,"time/step":12}`, true},
		{`{"step":1,"agent":"a","time":2}`, true},
		{`{"step":1,"agent":"tab\there \"q\" \\ /","time":2,"k\nnl":1E5}`, true},
		{`{"step":1,"agent":"ü","time":2,"ω/b":0}`, true},
		{`{"step":1,"agent":"a","time":2,"z":1,"a":2}`, true}, // unsorted: copied in its order
		{`{"step":1,"agent":"\u0041","time":2,"k":1}`, false}, // \u escape
		{`{"step":1, "agent":"a","time":2,"k":1}`, false},     // a space
		{`{"agent":"a","step":1,"time":2,"k":1}`, false},      // another order
		{`{"step":1,"agent":"a","k":1}`, false},               // no time
		{`{"step":01,"agent":"a","time":2,"k":1}`, false},     // not JSON
		{`{"step":1,"agent":"a","time":2,"k":1e400}`, false},  // beyond float64
		{`{"step":1,"agent":"a","time":2,"k":"1"}`, false},    // a string value
		{`{"step":1,"agent":"a","time":2,"step":1}`, false},   // a field again
		{`{"step":1,"agent":"a","time":2,"k":1,}`, false},     // trailing comma
		{`{"step":1,"agent":"a","time":2,"k":1`, false},       // torn
		{`{"step":1,"agent":"a","time":2,"":1}`, false},       // empty key
		{`{"step":1,"agent":"a","time":2,"k":-}`, false},      // not a number
		{`{"step":1,"agent":"a","time":2,"k":1.}`, false},     // not a number
		{`{"step":1,"agent":"a","time":2,"k":nul}`, false},    // not null
		{"{\"step\":1,\"agent\":\"\xff\",\"time\":2}", false}, // not UTF-8
	} {
		if fast := checkLine(t, c.line); fast != c.fast {
			t.Errorf("%q: fast path %v, want %v", c.line, fast, c.fast)
		}
	}
	// Every line of a real run takes the fast path.
	data, err := os.ReadFile(filepath.Join(realRun(t), metrics.FileName))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.SplitAfter(strings.TrimSuffix(string(data), "\n"), "\n") {
		if !checkLine(t, line) {
			t.Errorf("a line of a real run is left to ParseLine: %s", line)
		}
	}
}

func FuzzAppendLine(f *testing.F) {
	for _, s := range []string{
		`{"step":3,"agent":"gpt-char","time":1790000000.123,"accuracy/train":0.5,"loss/kl":null,"x":-1.5e-07}`,
		`{"step":1,"agent":"tab\there \"q\" \\ /","time":2,"k\nnl":1E5}`,
		`{"step":1,"agent":"a","time":2,"k":1e400}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) { checkLine(t, line) })
}
