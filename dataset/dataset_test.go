package dataset

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/hacrl/hacrl/internal/shared"
	"github.com/hacrl/hacrl/task"
	"github.com/hacrl/hacrl/verify"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadJSONL(t *testing.T) {
	path := writeFile(t, "toy.train.jsonl", `{"q": {"text": "What is 2+2?"}, "rm": {"ground_truth": 4}, "uid": "a"}

{"q": {"text": "  Half of 1? "}, "rm": {"ground_truth": "\\frac{1}{2}"}, "uid": 7}
{"q": {"text": "chat"}, "rm": {"ground_truth": 27.0}, "uid": "c"}
`)
	ps, err := LoadJSONL(path, Options{QuestionField: "q.text", AnswerField: "rm.ground_truth", IDField: "uid"})
	if err != nil {
		t.Fatal(err)
	}
	want := []task.Problem{
		{ID: "toy/a", Question: "What is 2+2?", Answer: "4"},
		{ID: "toy/7", Question: "Half of 1?", Answer: `\frac{1}{2}`},
		{ID: "toy/c", Question: "chat", Answer: "27.0"},
	}
	if len(ps) != len(want) {
		t.Fatalf("got %d problems, want %d: %+v", len(ps), len(want), ps)
	}
	for i := range want {
		if ps[i] != want[i] {
			t.Errorf("problem %d = %+v, want %+v", i, ps[i], want[i])
		}
	}
	// Without an id field, IDs count records, and Name overrides the prefix.
	ps, err = LoadJSONL(path, Options{Name: "x", QuestionField: "q.text", AnswerField: "rm.ground_truth"})
	if err != nil || ps[2].ID != "x/2" {
		t.Errorf("record-index IDs: %v, %v", ps, err)
	}
}

// A UTF-8 byte-order mark at the start of the file, or of any line (as
// files concatenated from several editors have), is not part of the JSON.
func TestLoadJSONLByteOrderMark(t *testing.T) {
	const bom = "\uFEFF"
	for name, content := range map[string]string{
		"file":       bom + `{"question": "a", "answer": "1"}` + "\n" + `{"question": "b", "answer": "2"}` + "\n",
		"every line": bom + `{"question": "a", "answer": "1"}` + "\r\n" + bom + `{"question": "b", "answer": "2"}`,
		"blank line": bom + "\n" + `{"question": "a", "answer": "1"}` + "\n" + bom + `{"question": "b", "answer": "2"}` + "\n",
	} {
		ps, err := LoadJSONL(writeFile(t, "bom.jsonl", content), Options{})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if len(ps) != 2 || ps[0].Question != "a" || ps[0].ID != "bom/0" || ps[1].Answer != "2" {
			t.Errorf("%s: got %+v", name, ps)
		}
	}
	// A mark inside a line is still an error.
	if _, err := LoadJSONL(writeFile(t, "bom.jsonl", `{"question": "a", "answer": "1"}`+"\n "+bom+`{"question": "b", "answer": "2"}`), Options{}); err == nil || !strings.Contains(err.Error(), "bom.jsonl:2") {
		t.Errorf("a mark after a space: %v, want an error on line 2", err)
	}
}

// A file without a single problem is an error naming it, whatever the
// format, rather than an empty set that a training run divides by.
func TestLoadEmptyFile(t *testing.T) {
	for _, content := range []string{"", "\n\n", "\uFEFF", "  \n\t\n"} {
		path := writeFile(t, "empty.jsonl", content)
		if _, err := Load(path, Options{}); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "no records") {
			t.Errorf("Load(%q): %v, want an error naming the file", content, err)
		}
	}
	path := filepath.Join(t.TempDir(), "empty.parquet")
	if err := parquet.WriteFile(path, []verlRow{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path, Options{}); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "no rows") {
		t.Errorf("Load(empty Parquet): %v, want an error naming the file", err)
	}
}

func TestLoadJSONLChatAndRules(t *testing.T) {
	path := writeFile(t, "c.jsonl", `{"prompt": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "first"}, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "Sum?"}], "sol": "so #### 1,234\n"}
`)
	ps, err := LoadJSONL(path, Options{QuestionField: "prompt", AnswerField: "sol", AnswerRule: AnswerAfterHashes, SolutionField: "sol"})
	if err != nil {
		t.Fatal(err)
	}
	if ps[0].Question != "Sum?" || ps[0].Answer != "1234" || ps[0].Solution != "so #### 1,234\n" {
		t.Errorf("got %+v", ps[0])
	}
}

func TestLoadJSONLErrorsNameFileLineAndField(t *testing.T) {
	tests := []struct {
		content string
		opts    Options
		want    []string // fragments of the error
	}{
		{"{\"question\": \"a\", \"answer\": \"1\"}\nnot json\n", Options{}, []string{"bad.jsonl:2", "invalid JSON"}},
		{`[1, 2]`, Options{}, []string{"bad.jsonl:1", "got a JSON list, want an object"}},
		{`{"question": "a"}`, Options{}, []string{"bad.jsonl:1", `field "answer" missing`}},
		{`{"question": "a", "answer": null}`, Options{}, []string{":1", `field "answer" missing`}},
		{`{"question": "a", "answer": {"x": 1}}`, Options{}, []string{":1", `field "answer"`, "got object, want a string or number"}},
		{`{"question": "", "answer": "1"}`, Options{}, []string{":1", "empty question"}},
		{`{"question": "a", "answer": "  "}`, Options{}, []string{":1", "empty answer"}},
		{`{"question": "a", "answer": "no hashes"}`, Options{AnswerRule: AnswerAfterHashes}, []string{":1", `no "####"`}},
		{`{"question": "a", "answer": "\\boxed{1"}`, Options{AnswerRule: AnswerLastBoxed}, []string{":1", `\boxed`}},
		{`{"p": "a", "answer": "1"}`, Options{QuestionField: "problem|question"}, []string{":1", "none of the fields"}},
		{`{"question": [{"role": "system", "content": "s"}], "answer": "1"}`, Options{}, []string{":1", "no user message"}},
		{"{\"question\": \"a\", \"answer\": \"1\", \"id\": 1}\n{\"question\": \"b\", \"answer\": \"2\", \"id\": 1}\n", Options{IDField: "id"}, []string{"bad.jsonl:2", `duplicate id "1"`}},
		{`{"question": "a", "answer": "1"} {"x": 2}`, Options{}, []string{":1", "more than one JSON value"}},
		{`{"question": "a", "answer": "1"}`, Options{AnswerRule: "last"}, []string{`unknown AnswerRule "last"`}},
		{`{"question": "a", "answer": "1"}`, Options{AnswerField: "a..b"}, []string{`bad field path "a..b"`}},
	}
	for _, tt := range tests {
		path := writeFile(t, "bad.jsonl", tt.content)
		_, err := LoadJSONL(path, tt.opts)
		if err == nil {
			t.Errorf("LoadJSONL(%q) accepted", tt.content)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("LoadJSONL(%q) error %q does not mention %q", tt.content, err, w)
			}
		}
	}
	if _, err := Load(filepath.Join(t.TempDir(), "x.csv"), Options{}); err == nil || !strings.Contains(err.Error(), "unknown format") {
		t.Errorf("Load(.csv) error = %v", err)
	}
	if _, err := LoadJSONL(filepath.Join(t.TempDir(), "missing.jsonl"), Options{}); err == nil {
		t.Error("LoadJSONL of a missing file succeeded")
	}
}

func TestLastBoxed(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{`so \boxed{5}.`, "5", true},
		{`\boxed{1} then \boxed{\frac{1}{2}}`, `\frac{1}{2}`, true},
		{`\boxed {x^{2}}`, "x^{2}", true},
		{`\boxed{\{1, 2\}}`, `\{1, 2\}`, true},
		{`\fbox{7}`, "7", true},
		{`\boxed{1}\fbox{2}`, "2", true},
		{`\boxed{`, "", false},
		{`\boxed 5`, "5", true},
		{`is $\boxed 9$.`, "9", true},
		{`\boxed5`, "", false},
		{`\boxed `, "", false},
		{`no box`, "", false},
	}
	for _, tt := range tests {
		got, ok := LastBoxed(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("LastBoxed(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// verl's Parquet layout, as written by its data preprocessing scripts.
type verlMessage struct {
	Role    string `parquet:"role"`
	Content string `parquet:"content"`
}

type verlRow struct {
	DataSource  string        `parquet:"data_source"`
	Prompt      []verlMessage `parquet:"prompt,list"`
	Ability     string        `parquet:"ability"`
	RewardModel struct {
		GroundTruth string `parquet:"ground_truth"`
		Style       string `parquet:"style"`
	} `parquet:"reward_model"`
	ExtraInfo struct {
		Index int64  `parquet:"index"`
		Split string `parquet:"split"`
	} `parquet:"extra_info"`
}

// verlOptionalRow is the same layout with nullable columns, as pandas and
// pyarrow write it.
type verlOptionalRow struct {
	DataSource  *string       `parquet:"data_source,optional"`
	Prompt      []verlMessage `parquet:"prompt,list,optional"`
	RewardModel *struct {
		GroundTruth *string `parquet:"ground_truth,optional"`
	} `parquet:"reward_model,optional"`
}

func TestLoadParquetVerlLayout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gsm8k_train.parquet")
	var rows []verlRow
	for i, q := range []string{"What is 1+1?", "What is 2*3?", "What is 10-4?"} {
		var r verlRow
		r.DataSource = "openai/gsm8k"
		r.Prompt = []verlMessage{{"system", "Answer briefly."}, {"user", q}}
		r.Ability = "math"
		r.RewardModel.GroundTruth = []string{"2", "6", "6"}[i]
		r.RewardModel.Style = "rule"
		r.ExtraInfo.Index = int64(100 + i)
		r.ExtraInfo.Split = "train"
		rows = append(rows, r)
	}
	if err := parquet.WriteFile(path, rows); err != nil {
		t.Fatal(err)
	}
	ps, err := LoadParquet(path, Options{IDField: "extra_info.index"})
	if err != nil {
		t.Fatal(err)
	}
	want := []task.Problem{
		{ID: "gsm8k_train/100", Question: "What is 1+1?", Answer: "2"},
		{ID: "gsm8k_train/101", Question: "What is 2*3?", Answer: "6"},
		{ID: "gsm8k_train/102", Question: "What is 10-4?", Answer: "6"},
	}
	if len(ps) != len(want) {
		t.Fatalf("got %+v", ps)
	}
	for i := range want {
		if ps[i] != want[i] {
			t.Errorf("row %d = %+v, want %+v", i, ps[i], want[i])
		}
	}
	// Load dispatches on the extension; another column works as a field.
	ps, err = Load(path, Options{AnswerField: "data_source"})
	if err != nil || ps[0].Answer != "openai/gsm8k" || ps[1].ID != "gsm8k_train/1" {
		t.Errorf("Load with data_source as answer: %+v, %v", ps, err)
	}
}

func TestLoadParquetNullsAndErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n.parquet")
	gt := "5"
	src := "s"
	rows := []verlOptionalRow{
		{DataSource: &src, Prompt: []verlMessage{{"user", "q0"}}, RewardModel: &struct {
			GroundTruth *string `parquet:"ground_truth,optional"`
		}{&gt}},
		{DataSource: &src, Prompt: []verlMessage{{"user", "q1"}}, RewardModel: nil},
	}
	if err := parquet.WriteFile(path, rows); err != nil {
		t.Fatal(err)
	}
	_, err := LoadParquet(path, Options{})
	if err == nil || !strings.Contains(err.Error(), "n.parquet: row 1") || !strings.Contains(err.Error(), `"reward_model.ground_truth" missing`) {
		t.Errorf("null ground truth: error = %v", err)
	}
	ps, err := LoadParquet(path, Options{AnswerField: "data_source"})
	if err != nil || len(ps) != 2 || ps[1].Question != "q1" {
		t.Errorf("nullable columns: %+v, %v", ps, err)
	}

	notParquet := writeFile(t, "x.parquet", "PAR1 this is not parquet")
	if _, err := LoadParquet(notParquet, Options{}); err == nil || !strings.Contains(err.Error(), "x.parquet") {
		t.Errorf("garbage file: error = %v", err)
	}
}

// TestSharedSets loads every data set of the shared data directory by name
// from a working directory outside the repository, the directory given by
// HACRL_DATA, and checks its size, IDs and that every reference answer is
// non-empty and judged equal to itself, bare and in a \boxed{} response.
func TestSharedSets(t *testing.T) {
	data, err := shared.Data()
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	t.Setenv(shared.DataEnv, data)
	t.Setenv(shared.SharedEnv, "")
	tests := []struct {
		name     string
		problems int
		skipped  int
		spots    map[int]string // record index -> reference answer
	}{
		{"aime24", 30, 0, map[int]string{0: "204", 7: "025"}},
		{"aime25", 30, 0, map[int]string{0: "70"}},
		{"amc23", 40, 0, map[int]string{0: "27.0", 15: "-1.0"}},
		{"gsm8k", 1319, 0, map[int]string{0: "18", 1: "3"}},
		{"math", 5000, 0, nil},
		{"math500", 500, 0, map[int]string{0: `\left( 3, \frac{\pi}{2} \right)`}},
		{"math_train", 7498, 2, nil},
		{"minerva_math", 272, 0, map[int]string{0: "1.6"}},
		{"olympiadbench", 675, 0, nil},
	}
	var names []string
	for _, tt := range tests {
		names = append(names, tt.name)
	}
	if got := Benchmarks(); !slices.Equal(got, names) {
		t.Errorf("Benchmarks() = %v, want %v", got, names)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Benchmark(tt.name)
			if err != nil {
				t.Fatal(err)
			}
			if d.Len(task.Test) != tt.problems || d.Len(task.Train) != 0 || d.Skipped() != tt.skipped {
				t.Errorf("%d test and %d train problems, %d skipped; want %d, 0 and %d",
					d.Len(task.Test), d.Len(task.Train), d.Skipped(), tt.problems, tt.skipped)
			}
			ids := map[string]bool{}
			for _, p := range d.Problems(task.Test) {
				if p.Question == "" || p.Answer == "" {
					t.Errorf("empty question or answer in %+v", p)
				}
				if ids[p.ID] || !strings.HasPrefix(p.ID, tt.name+"/") {
					t.Errorf("bad or duplicate ID %q", p.ID)
				}
				ids[p.ID] = true
				if !verify.Equal(p.Answer, p.Answer) {
					t.Errorf("%s: reference %q is not equal to itself", p.ID, p.Answer)
				}
				if r := d.Reward(p, `So the answer is \boxed{`+p.Answer+`}.`); r != 1 {
					t.Errorf("%s: a response boxing the reference %q gets reward %v", p.ID, p.Answer, r)
				}
			}
			for i, want := range tt.spots {
				if got := d.Problem(task.Test, i).Answer; got != want {
					t.Errorf("problem %d: answer %q, want %q", i, got, want)
				}
			}
		})
	}
	if _, err := Benchmark("math5000"); err == nil || !strings.Contains(err.Error(), "unknown benchmark") {
		t.Errorf("Benchmark(math5000) error = %v", err)
	}
}

// TestSharedReferenceRules checks the reference answers that need a rule of
// their own: OlympiadBench's $-wrapped list items, MATH's "\boxed 2".
func TestSharedReferenceRules(t *testing.T) {
	ob, err := Benchmark("olympiadbench")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ob.Problems(task.Test) {
		if strings.Contains(p.Answer, "$") {
			t.Errorf("%s: answer %q keeps a $", p.ID, p.Answer)
		}
	}
	mt, err := Benchmark("math_train")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"math_train/train/algebra/24014.json": "2", "math_train/train/algebra/25040.json": "9"}
	for _, p := range mt.Problems(task.Test) {
		if w, ok := want[p.ID]; ok {
			if p.Answer != w {
				t.Errorf("%s: answer %q, want %q", p.ID, p.Answer, w)
			}
			delete(want, p.ID)
		}
		if p.ID == "math_train/train/number_theory/7115.json" || p.ID == "math_train/train/number_theory/7117.json" {
			t.Errorf("%s (an empty \\boxed{}) was not dropped", p.ID)
		}
	}
	if len(want) > 0 {
		t.Errorf("problems not found: %v", want)
	}
}

func TestAnswerRulesAndPaths(t *testing.T) {
	path := writeFile(t, "r.jsonl", `{"q": "a", "fa": ["$\\frac{1}{2}$"], "s": "so \\boxed{}"}
{"q": "b", "fa": ["$69$,$84$ costs \\$5"], "s": "\\boxed 2$."}
`)
	ps, err := LoadJSONL(path, Options{QuestionField: "q", AnswerField: "fa.0", AnswerRule: AnswerNoDollars})
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 || ps[0].Answer != `\frac{1}{2}` || ps[1].Answer != `69,84 costs \$5` {
		t.Errorf("AnswerNoDollars on fa.0: %+v", ps)
	}
	if _, err := LoadJSONL(path, Options{QuestionField: "q", AnswerField: "fa.1"}); err == nil || !strings.Contains(err.Error(), `"fa.1" missing`) {
		t.Errorf("index past the list: error = %v", err)
	}
	if _, err := LoadJSONL(path, Options{QuestionField: "q", AnswerField: "s", AnswerRule: AnswerLastBoxed}); err == nil || !strings.Contains(err.Error(), "r.jsonl:1") || !strings.Contains(err.Error(), "empty answer") {
		t.Errorf("empty \\boxed{}: error = %v", err)
	}
	b, err := loadJSONL(path, Options{QuestionField: "q", AnswerField: "s", AnswerRule: AnswerLastBoxed, SkipEmptyAnswers: true})
	if err != nil {
		t.Fatal(err)
	}
	if b.skipped != 1 || len(b.problems) != 1 || b.problems[0].Answer != "2" || b.problems[0].ID != "r/1" {
		t.Errorf("SkipEmptyAnswers: %d skipped, %+v", b.skipped, b.problems)
	}
}

func TestMinervaAnswersAreLastBoxed(t *testing.T) {
	d, err := Benchmark("minerva_math")
	if err != nil {
		t.Fatal(err)
	}
	p := d.Problem(task.Test, 0)
	if p.Answer != "1.6" {
		t.Errorf("first minerva answer %q, want 1.6", p.Answer)
	}
	for _, p := range d.Problems(task.Test) {
		if strings.Count(p.Answer, "{") != strings.Count(p.Answer, "}") {
			t.Errorf("%s: unbalanced answer %q", p.ID, p.Answer)
		}
		if i := strings.LastIndex(p.Solution, p.Answer); i < strings.LastIndex(p.Solution, `\boxed`) {
			t.Errorf("%s: answer %q is not inside the solution's last \\boxed", p.ID, p.Answer)
		}
	}
}

func TestDatasetAsTask(t *testing.T) {
	train := []task.Problem{{ID: "t/0", Question: "Half of 1?", Answer: `\frac{1}{2}`}, {ID: "t/1", Question: "2+2?", Answer: "4"}}
	var d task.Task = New("toy", train, nil)
	if n, finite := task.Len(d, task.Train); n != 2 || !finite {
		t.Errorf("task.Len = %d, %v", n, finite)
	}
	if d.Problem(task.Train, 3) != train[1] || d.Problem(task.Train, -1) != train[1] {
		t.Error("Problem does not wrap its index modulo the split length")
	}
	p := train[0]
	tests := []struct {
		response string
		want     float64
	}{
		{`so the answer is \boxed{0.5}`, 1},
		{`\boxed{\frac{1}{2}}`, 1},
		{`\boxed{\frac{1}{3}}`, 0},
		{`I do not know`, 0},
	}
	for _, tt := range tests {
		if got := d.Reward(p, tt.response); got != tt.want {
			t.Errorf("Reward(%q) = %v, want %v", tt.response, got, tt.want)
		}
	}
	fw, err := New("toy", train, nil).WithFormatWeight(0.25)
	if err != nil {
		t.Fatal(err)
	}
	if got := fw.Reward(p, `\boxed{\frac{1}{3}}`); got != 0.25 {
		t.Errorf("format weight: Reward = %v, want 0.25", got)
	}
	if _, err := fw.WithFormatWeight(1); err == nil {
		t.Error("WithFormatWeight(1) accepted")
	}
	x := d.(task.Extractor)
	if a, ok := x.Extract(`\boxed{0.5}`); !ok || !x.Equal(a, `\frac{1}{2}`) || x.Equal(a, "2") {
		t.Errorf("Extract/Equal: %q %v", a, ok)
	}

	s := New("toy", train, nil).WithSuffix(MathSuffix)
	if got := s.Problem(task.Train, 0).Question; got != "Half of 1? "+MathSuffix {
		t.Errorf("WithSuffix question %q", got)
	}
	if train[0].Question != "Half of 1?" || d.Problem(task.Train, 0).Question != "Half of 1?" {
		t.Error("WithSuffix modified the original")
	}

	exact := New("words", []task.Problem{{Question: "Color of sky?", Answer: "blue"}}, nil).WithChecker(Checker{
		Reward: func(r, ref string) float64 {
			if strings.TrimSpace(r) == ref {
				return 1
			}
			return 0
		},
	})
	if exact.Reward(exact.Problem(task.Train, 0), " blue ") != 1 || exact.Reward(exact.Problem(task.Train, 0), "red") != 0 {
		t.Error("WithChecker's reward is not used")
	}

	defer func() {
		if recover() == nil {
			t.Error("Problem on an empty split did not panic")
		}
	}()
	d.Problem(task.Test, 0)
}
