package rollout

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// sampleRecords is a step's log of two agents sharing rollouts on two prompts.
func sampleRecords(step int) []Record {
	var recs []Record
	for p := range 2 {
		for a, name := range []string{"gpt-char", "llama-bpe"} {
			for s := range 2 {
				r := Record{
					Step: step, Prompt: p, ProblemID: fmt.Sprintf("arith/train/%d", p), Question: fmt.Sprintf("%d+%d=", p, s),
					Answer: "3", Agent: name, Sample: s, PromptText: "<|im_start|>user\n1+2=<|im_end|>\n<|im_start|>assistant\n",
					Response: fmt.Sprintf("the answer is %d\n<b>é</b>", s+2), Reward: float64(s), Tokens: 7 + s, Truncated: s == 0,
				}
				for l, ln := range []string{"gpt-char", "llama-bpe"} {
					u := LearnerUse{Learner: ln, Self: l == a, Advantage: 0.1*float64(s) - 0.05, Update: l, Ratio: 1 + 0.01*float64(p), Clip: ClipInside, Kept: true}
					if l != a {
						u.Omega, u.Clip, u.Kept, u.RetokenizeChanged = 1.25, ClipBelow, false, p == 1
					}
					r.Learners = append(r.Learners, u)
				}
				recs = append(recs, r)
			}
		}
	}
	return recs
}

func TestLogRoundTrip(t *testing.T) {
	out := t.TempDir()
	recs := sampleRecords(4)
	path := LogPath(out, 4)
	if filepath.Base(path) != "step-00000004.jsonl.gz" || filepath.Base(filepath.Dir(path)) != LogDir {
		t.Fatalf("log path %s", path)
	}
	if err := WriteLog(path, recs); err != nil {
		t.Fatal(err)
	}
	got, err := ReadLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, recs) {
		t.Fatalf("read back\n%+v\nwant\n%+v", got, recs)
	}
	// The same records give the same bytes, and the file is plain gzip of one
	// JSON object per line, readable by zcat.
	first, _ := os.ReadFile(path)
	if err := WriteLog(path, got); err != nil {
		t.Fatal(err)
	}
	second, _ := os.ReadFile(path)
	if !bytes.Equal(first, second) {
		t.Errorf("rewriting the same records changed the file")
	}
	text := gunzip(t, first)
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) != len(recs) || !strings.Contains(lines[0], `"prompt_text":"<|im_start|>user`) || !strings.Contains(lines[0], `"learners":[{"learner":"gpt-char","self":true`) {
		t.Errorf("file text:\n%s", text)
	}
	var raw []string
	if err := ScanLog(path, func(line []byte, rec *Record) error {
		raw = append(raw, string(line))
		return nil
	}); err != nil || !slices.Equal(raw, lines) {
		t.Errorf("ScanLog lines %q (%v), want %q", raw, err, lines)
	}
	// No temporary files are left beside it.
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 1 {
		t.Errorf("rollouts directory holds %d entries, want 1", len(ents))
	}
}

func gunzip(t *testing.T, b []byte) string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	text, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(text)
}

func gz(t *testing.T, text string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(text))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestReadLogErrorsNameFileAndLine(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonl.gz")
	if err := WriteLog(good, sampleRecords(2)); err != nil {
		t.Fatal(err)
	}
	valid, _ := os.ReadFile(good)
	text := gunzip(t, valid)
	lines := strings.SplitAfter(text, "\n")
	corrupt := slices.Clone(valid)
	for i := len(corrupt) / 2; i < len(corrupt)/2+8; i++ {
		corrupt[i] ^= 0xff
	}
	tests := []struct {
		name string
		file string
		data []byte
		want string // wanted in the error after "rollout log <path>"
	}{
		{"not gzip", "plain.jsonl.gz", []byte(text), ": not a gzip file"},
		{"truncated", "cut.jsonl.gz", valid[:len(valid)*2/3], ": line "},
		{"corrupt", "corrupt.jsonl.gz", corrupt, ": line "},
		{"bad json", "badjson.jsonl.gz", gz(t, lines[0]+"{\"step\": 2, \"agent\": \n"), ": line 2: not a rollout record"},
		{"empty line", "empty.jsonl.gz", gz(t, lines[0]+lines[1]+"\n"+lines[2]), ": line 3: empty line"},
		{"no agent", "noagent.jsonl.gz", gz(t, `{"step": 2, "prompt": 0}`+"\n"), ": line 1: no agent"},
		{"bad clip", "clip.jsonl.gz", gz(t, lines[0]+strings.Replace(lines[1], `"clip":"below"`, `"clip":"out"`, 1)), `: line 2: learners[1] (llama-bpe): clip "out"`},
		{"step of another file", "step-00000003.jsonl.gz", gz(t, lines[0]), ": line 1: record of step 2 in the file of step 3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.file)
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadLog(path)
			t.Log(err)
			if err == nil || !strings.Contains(err.Error(), "rollout log "+path+tc.want) {
				t.Fatalf("error %v, want one containing %q", err, "rollout log "+path+tc.want)
			}
		})
	}
	// A last line without its newline is still a line.
	path := filepath.Join(dir, "nonewline.jsonl.gz")
	os.WriteFile(path, gz(t, strings.TrimSuffix(text, "\n")), 0o644)
	if recs, err := ReadLog(path); err != nil || len(recs) != len(lines)-1 {
		t.Errorf("no final newline: %d records, %v; want %d", len(recs), err, len(lines)-1)
	}
}

func TestLogStepsAndPrune(t *testing.T) {
	out := t.TempDir()
	if steps, err := LogSteps(out); err != nil || steps != nil {
		t.Fatalf("no rollouts directory: %v, %v", steps, err)
	}
	for _, s := range []int{10, 2, 4, 6} {
		if err := WriteLog(LogPath(out, s), sampleRecords(s)); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(out, LogDir)
	for _, name := range []string{".step-00000008.jsonl.gz.tmp-123", "notes.txt", "step-7.jsonl.gz"} {
		os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644)
	}
	steps, err := LogSteps(out)
	if err != nil || !slices.Equal(steps, []int{2, 4, 6, 10}) {
		t.Fatalf("LogSteps %v (%v)", steps, err)
	}
	if err := PruneLogs(out, 4); err != nil {
		t.Fatal(err)
	}
	if steps, _ := LogSteps(out); !slices.Equal(steps, []int{2, 4}) {
		t.Errorf("after PruneLogs(4): steps %v, want [2 4]", steps)
	}
	var names []string
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		names = append(names, e.Name())
	}
	// Other files stay; the temporary file goes.
	if want := []string{"notes.txt", "step-00000002.jsonl.gz", "step-00000004.jsonl.gz", "step-7.jsonl.gz"}; !slices.Equal(names, want) {
		t.Errorf("after PruneLogs: %v, want %v", names, want)
	}
	if err := PruneLogs(out, 0); err != nil {
		t.Fatal(err)
	}
	if steps, _ := LogSteps(out); len(steps) != 0 {
		t.Errorf("after PruneLogs(0): steps %v", steps)
	}
}

// BenchmarkWriteLog writes a paper-sized step: 3 agents × 64 prompts × 8
// responses of about 2,000 characters, each seen by 3 learners.
func BenchmarkWriteLog(b *testing.B) {
	base := sampleRecords(1)
	recs := make([]Record, 0, 1536)
	for i := range 1536 {
		r := base[i%len(base)]
		r.Prompt, r.Sample = i/24, i%8
		r.Response = strings.Repeat(fmt.Sprintf("%d+%d=%d; ", i, i%97, i+i%97), 2000/12)
		r.Learners = append(slices.Clone(r.Learners), r.Learners[0])
		recs = append(recs, r)
	}
	path := filepath.Join(b.TempDir(), "step-00000001.jsonl.gz")
	b.ResetTimer()
	for b.Loop() {
		if err := WriteLog(path, recs); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	st, _ := os.Stat(path)
	b.ReportMetric(float64(st.Size())/1024, "KiB/file")
}
