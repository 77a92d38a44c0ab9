package verify

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

func TestVerifyJSONL(t *testing.T) {
	in := strings.Join([]string{
		`{"id":7,"answer":"\\frac{1}{2}","reference":"0.5","note":{"a":[1,2]}}`,
		`{"reference": "27.0", "answer": 27}`,
		``,
		`{"answer":"3","reference":"4","equal":true}`,
		`not json`,
		`{"answer":"3"}`,
		`{"answer":[1],"reference":"1"}`,
		`["answer","reference"]`,
		`{"answer":"1,000","reference":"1000"} trailing`,
		`{"answer":"x^2","reference":"x\\cdot x"}`,
	}, "\n")
	var out, errOut bytes.Buffer
	sum, err := VerifyJSONL(context.Background(), strings.NewReader(in), &out, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	wantOut := `{"id":7,"answer":"\\frac{1}{2}","reference":"0.5","note":{"a":[1,2]},"equal":true}
{"reference":"27.0","answer":27,"equal":true}
{"answer":"3","reference":"4","equal":false}
{"answer":"x^2","reference":"x\\cdot x","equal":true}
`
	if out.String() != wantOut {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), wantOut)
	}
	wantSum := Summary{Lines: 9, Equal: 3, NotEqual: 1, Bad: 5}
	if sum != wantSum {
		t.Errorf("summary = %+v, want %+v", sum, wantSum)
	}
	for _, ln := range []string{"line 5:", "line 6:", "line 7:", "line 8:", "line 9:"} {
		if !strings.Contains(errOut.String(), ln) {
			t.Errorf("error output lacks %q:\n%s", ln, errOut.String())
		}
	}
	if strings.Contains(errOut.String(), "line 1:") || strings.Contains(errOut.String(), "line 10:") {
		t.Errorf("good lines reported as bad:\n%s", errOut.String())
	}
}

// A byte-order mark at the start of the input (or of a line) is skipped.
func TestVerifyJSONLByteOrderMark(t *testing.T) {
	in := "\uFEFF{\"answer\":\"1\",\"reference\":\"1\"}\n\uFEFF{\"answer\":\"2\",\"reference\":\"3\"}\n"
	var out, errOut bytes.Buffer
	sum, err := VerifyJSONL(context.Background(), strings.NewReader(in), &out, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Summary{Lines: 2, Equal: 1, NotEqual: 1}); sum != want || errOut.Len() != 0 {
		t.Errorf("summary %+v (errors %q), want %+v", sum, errOut.String(), want)
	}
}

func TestVerifyJSONLCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errOut bytes.Buffer
	_, err := VerifyJSONL(ctx, strings.NewReader(`{"answer":"1","reference":"1"}`), &out, &errOut)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestVerifyJSONLWriteError(t *testing.T) {
	var errOut bytes.Buffer
	_, err := VerifyJSONL(context.Background(), strings.NewReader(`{"answer":"1","reference":"1"}`), failingWriter{}, &errOut)
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("err = %v, want the write error", err)
	}
}
