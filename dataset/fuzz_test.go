package dataset

import (
	"bufio"
	"bytes"
	"encoding/json"
	"github.com/hacrl/hacrl/internal/timebox"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/hacrl/hacrl/internal/shared"
	"github.com/hacrl/hacrl/task"
)

// fuzzRules are the answer rules a fuzz input picks from by its rule byte.
var fuzzRules = []AnswerRule{AnswerAsIs, AnswerAfterHashes, AnswerLastBoxed, AnswerNoDollars}

// sharedLines returns the first n lines of a shared data file
// (benchmarks/<set>/test.jsonl or train/<set>/train.jsonl).
func sharedLines(tb testing.TB, rel string, n int) [][]byte {
	tb.Helper()
	dir, err := shared.Data()
	if err != nil {
		tb.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, rel))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	var lines [][]byte
	for len(lines) < n && sc.Scan() {
		lines = append(lines, bytes.Clone(sc.Bytes()))
	}
	if err := sc.Err(); err != nil || len(lines) < n {
		tb.Fatalf("%s: %d lines: %v", rel, len(lines), err)
	}
	return lines
}

// FuzzLoadJSONL feeds any file to the JSONL reader, with the answer rule
// and the use of an id field as inputs. A load either fails naming the file
// and a line of it ("dataset PATH:LINE: ...", or "dataset PATH: no records"
// for a file without any), or gives problems with trimmed non-empty
// questions and answers and unique IDs, at most one per non-blank line, that
// read back unchanged when written out as JSONL. The seeds are the first
// lines of every shared benchmark and of the MATH training set.
func FuzzLoadJSONL(f *testing.F) {
	for _, s := range []struct {
		rel  string
		rule AnswerRule
	}{
		{"benchmarks/gsm8k/test.jsonl", AnswerAfterHashes},
		{"benchmarks/aime24/test.jsonl", AnswerAsIs},
		{"benchmarks/amc23/test.jsonl", AnswerAsIs},
		{"benchmarks/minerva_math/test.jsonl", AnswerLastBoxed},
		{"benchmarks/math500/test.jsonl", AnswerAsIs},
		{"benchmarks/math/test.jsonl", AnswerLastBoxed},
		{"benchmarks/olympiadbench/test.jsonl", AnswerNoDollars},
		{"benchmarks/aime25/test.jsonl", AnswerAsIs},
		{"train/math/train.jsonl", AnswerLastBoxed},
	} {
		lines := sharedLines(f, s.rel, 3)
		rule := uint8(slicesIndex(fuzzRules, s.rule))
		f.Add(bytes.Join(lines, []byte("\n")), rule, true)
		f.Add(append(append([]byte("\uFEFF"), lines[0]...), "\n\n"...), rule, false)
	}
	f.Add([]byte(`{"question": "1+1?", "answer": 2}`+"\n"+`[1]`), uint8(0), false)
	f.Fuzz(func(t *testing.T, data []byte, rule uint8, withID bool) {
		path := filepath.Join(t.TempDir(), "fuzz.jsonl")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		opts := fuzzOptions(rule, withID)
		var ps []task.Problem
		var err error
		timebox.Run(t, 10*time.Second, func() { ps, err = LoadJSONL(path, opts) })
		if err != nil {
			checkFileError(t, err, path, bytes.Count(data, []byte("\n"))+1, "records")
			return
		}
		blank := 0
		for line := range bytes.SplitSeq(data, []byte("\n")) {
			if len(bytes.TrimSpace(bytes.TrimPrefix(line, bom))) == 0 {
				blank++
			}
		}
		if nonBlank := bytes.Count(data, []byte("\n")) + 1 - blank; len(ps) > nonBlank {
			t.Fatalf("%d problems from %d non-blank lines", len(ps), nonBlank)
		}
		checkProblems(t, ps)
	})
}

// FuzzLoadParquet feeds any file to the Parquet reader (verl's layout, the
// id taken from extra_info.index). A load takes at most 10 s and either fails with an error naming
// the file, and the row when a row is at fault, or gives problems as
// FuzzLoadJSONL requires. The seeds are Parquet files in verl's layout
// holding the first problems of the shared GSM8K and MATH-500 sets, one of
// them with nullable columns as pandas writes them.
func FuzzLoadParquet(f *testing.F) {
	gsm := sharedLines(f, "benchmarks/gsm8k/test.jsonl", 4)
	math := sharedLines(f, "benchmarks/math500/test.jsonl", 3)
	var rows []verlRow
	var optional []verlOptionalRow
	for i, line := range append(gsm, math...) {
		var rec struct {
			Question, Problem, Answer string
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			f.Fatal(err)
		}
		var r verlRow
		r.DataSource = "openai/gsm8k"
		r.Prompt = []verlMessage{{"system", "Answer briefly."}, {"user", rec.Question + rec.Problem}}
		r.Ability = "math"
		r.RewardModel.GroundTruth = rec.Answer
		r.RewardModel.Style = "rule"
		r.ExtraInfo.Index = int64(i)
		r.ExtraInfo.Split = "test"
		rows = append(rows, r)
		src := r.DataSource
		optional = append(optional, verlOptionalRow{DataSource: &src, Prompt: r.Prompt,
			RewardModel: &struct {
				GroundTruth *string `parquet:"ground_truth,optional"`
			}{&r.RewardModel.GroundTruth}})
	}
	for _, write := range []func(*bytes.Buffer) error{
		func(b *bytes.Buffer) error { return parquet.Write(b, rows[:4]) },
		func(b *bytes.Buffer) error { return parquet.Write(b, rows[4:]) },
		func(b *bytes.Buffer) error { return parquet.Write(b, optional[:2]) },
	} {
		var b bytes.Buffer
		if err := write(&b); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes(), uint8(1), true)
		f.Add(b.Bytes(), uint8(0), false)
	}
	f.Fuzz(func(t *testing.T, data []byte, rule uint8, withID bool) {
		path := filepath.Join(t.TempDir(), "fuzz.parquet")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		opts := Options{AnswerRule: fuzzRules[int(rule)%len(fuzzRules)]}
		if withID {
			opts.IDField = "extra_info.index"
		}
		var ps []task.Problem
		var err error
		timebox.Run(t, 10*time.Second, func() { ps, err = LoadParquet(path, opts) })
		if err != nil {
			if !strings.HasPrefix(err.Error(), "dataset "+path+": ") {
				t.Fatalf("error names no file: %v", err)
			}
			return
		}
		checkProblems(t, ps)
	})
}

func slicesIndex(rules []AnswerRule, r AnswerRule) int {
	for i, x := range rules {
		if x == r {
			return i
		}
	}
	return -1
}

// fuzzOptions are the options a JSONL fuzz input picks: the shared sets'
// question and answer fields, its answer rule, and an id field or none.
func fuzzOptions(rule uint8, withID bool) Options {
	o := Options{QuestionField: "question|problem", AnswerField: "answer|final_answer.0|solution",
		AnswerRule: fuzzRules[int(rule)%len(fuzzRules)]}
	if withID {
		o.IDField = "idx|id|unique_id"
	}
	return o
}

// checkFileError checks that a JSONL load's error names the file and a
// line of it, or says the file holds no problems.
func checkFileError(t *testing.T, err error, path string, lines int, what string) {
	t.Helper()
	msg := err.Error()
	if msg == "dataset "+path+": no "+what+" (the file holds no problems)" {
		return
	}
	m := regexp.MustCompile(`^dataset ` + regexp.QuoteMeta(path) + `:(\d+): \S`).FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("error names no line of the file: %v", err)
	}
	if n, _ := strconv.Atoi(m[1]); n < 1 || n > lines {
		t.Fatalf("error names line %d of a %d-line file: %v", n, lines, err)
	}
}

// checkProblems checks what every load must give, and that the problems
// read back unchanged from a JSONL file of their questions, answers and ids.
func checkProblems(t *testing.T, ps []task.Problem) {
	t.Helper()
	if len(ps) == 0 {
		t.Fatal("a load without error and without problems")
	}
	ids := map[string]bool{}
	var b bytes.Buffer
	for i, p := range ps {
		switch {
		case p.Question == "" || p.Question != strings.TrimSpace(p.Question):
			t.Fatalf("problem %d: question %q", i, p.Question)
		case p.Answer == "" || p.Answer != strings.TrimSpace(p.Answer):
			t.Fatalf("problem %d: answer %q", i, p.Answer)
		case !strings.HasPrefix(p.ID, "fuzz/") || ids[p.ID]:
			t.Fatalf("problem %d: id %q (seen before: %v)", i, p.ID, ids[p.ID])
		}
		ids[p.ID] = true
		line, err := json.Marshal(map[string]string{"q": p.Question, "a": p.Answer, "id": strings.TrimPrefix(p.ID, "fuzz/")})
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(line, '\n'))
	}
	path := filepath.Join(t.TempDir(), "fuzz.jsonl")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	back, err := LoadJSONL(path, Options{QuestionField: "q", AnswerField: "a", IDField: "id"})
	if err != nil {
		t.Fatalf("the problems written back as JSONL do not load: %v", err)
	}
	if len(back) != len(ps) {
		t.Fatalf("%d problems read back as %d", len(ps), len(back))
	}
	for i := range ps {
		want := ps[i]
		want.Solution = ""
		if back[i] != want {
			t.Fatalf("problem %d read back as %+v, want %+v", i, back[i], want)
		}
	}
}
