package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestPlainLines(t *testing.T) {
	var buf bytes.Buffer
	d := New(&buf, []string{"a", "b"}, 10)
	if d.live {
		t.Fatal("a bytes.Buffer is not a terminal")
	}
	d.Phase(1, "a", "sample")
	d.Phase(1, "b", "update")
	d.Step(1, 10, 2*time.Second, "a acc 0.5")
	d.Step(2, 10, 4*time.Second, "a acc 0.6")
	d.Log("resumed")
	out := buf.String()
	for _, want := range []string{
		"step 1/10 a: sample", "step 1/10 b: update",
		"step 1/10  2.0s/step  ETA 18s  a acc 0.5", // 9 steps left at 2 s
		"step 2/10  3.0s/step  ETA 24s  a acc 0.6", // mean of 2 s and 4 s, 8 left
		"resumed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b[") {
		t.Errorf("plain output holds terminal escapes:\n%q", out)
	}
}
