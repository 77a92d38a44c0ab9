// Package dataset loads prompt sets with reference answers from JSONL and
// Parquet files (including verl's Parquet layout) and the math benchmarks in
// the shared data directory, and exposes a set as a task.Task whose reward is
// the math answer checker of package verify.
//
// Field names are configurable dotted paths ("reward_model.ground_truth");
// the reference answer is derived from its field by an AnswerRule (as is,
// after "####" as in GSM8K, or the last \boxed{} of a solution). A bad record
// fails the load with an error naming the file, the line or row, the field and
// what was expected, and so does a file without any problem; a UTF-8
// byte-order mark at the start of a JSONL file or line is skipped.
package dataset

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hacrl/hacrl/task"
)

// AnswerRule derives a reference answer from the answer field's text.
type AnswerRule string

// The answer rules.
const (
	// AnswerAsIs takes the field as written (numbers keep their literal
	// form, e.g. "27.0"), trimmed of surrounding space.
	AnswerAsIs AnswerRule = ""
	// AnswerAfterHashes takes the text after the last "####" with commas
	// removed, as GSM8K writes its answers ("#### 1,000" gives "1000").
	AnswerAfterHashes AnswerRule = "hashes"
	// AnswerLastBoxed takes the content of the last \boxed{...}, with braces
	// matched, as MATH-style solutions write their answers (see LastBoxed).
	AnswerLastBoxed AnswerRule = "boxed"
	// AnswerNoDollars takes the field with the $ delimiters of inline LaTeX
	// removed, as OlympiadBench writes its answers ("$\frac{1}{2}$",
	// "$69$,$84$"); an escaped \$ stays.
	AnswerNoDollars AnswerRule = "dollars"
)

// Options says where a record keeps its question, answer and id.
type Options struct {
	// Name prefixes problem IDs; default: the file's base name up to its
	// first dot.
	Name string
	// QuestionField is the dotted path of the question; alternatives are
	// separated by "|" and the first present one is used ("problem|question").
	// A list of chat messages ({role, content}) gives the content of its last
	// user message. Default: "question" for JSONL, "prompt" for Parquet.
	QuestionField string
	// AnswerField is the dotted path of the answer text; default "answer"
	// for JSONL, "reward_model.ground_truth" for Parquet.
	AnswerField string
	// AnswerRule derives the reference answer from the answer text.
	AnswerRule AnswerRule
	// IDField is the dotted path of a record id (a string or integer),
	// giving problem IDs "<Name>/<id>"; ids must be unique. Default: none,
	// and IDs are "<Name>/<record index>" counting from 0.
	IDField string
	// SolutionField is the dotted path of a worked solution copied into
	// Problem.Solution; default none.
	SolutionField string
	// SkipEmptyAnswers drops a record whose reference answer comes out empty
	// (e.g. an empty \boxed{}) instead of failing the load.
	SkipEmptyAnswers bool
}

// withDefaults fills the empty fields of o for a file at path.
func (o Options) withDefaults(path, question, answer string) Options {
	if o.Name == "" {
		o.Name, _, _ = strings.Cut(filepath.Base(path), ".")
	}
	if o.QuestionField == "" {
		o.QuestionField = question
	}
	if o.AnswerField == "" {
		o.AnswerField = answer
	}
	return o
}

// Load reads the problems of a .jsonl or .parquet file; a file with none is
// an error.
func Load(path string, opts Options) ([]task.Problem, error) {
	switch {
	case strings.HasSuffix(path, ".jsonl"):
		return LoadJSONL(path, opts)
	case strings.HasSuffix(path, ".parquet"):
		return LoadParquet(path, opts)
	}
	return nil, fmt.Errorf("dataset %s: unknown format (want a .jsonl or .parquet file)", path)
}

// bom is the UTF-8 byte-order mark some editors write at the start of a file.
var bom = []byte("\uFEFF")

// LoadJSONL reads one problem per non-blank line of a JSON Lines file. A
// UTF-8 byte-order mark at the start of the file or of a line is skipped.
func LoadJSONL(path string, opts Options) ([]task.Problem, error) {
	b, err := loadJSONL(path, opts)
	if err != nil {
		return nil, err
	}
	return b.result(path, "records")
}

// loadJSONL is LoadJSONL, returning the builder with the skipped count.
func loadJSONL(path string, opts Options) (*builder, error) {
	f, b, err := open(path, opts, "question", "answer")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for line := 1; ; line++ {
		text, err := r.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("dataset %s:%d: %w", path, line, err)
		}
		text = bytes.TrimPrefix(text, bom)
		if len(bytes.TrimSpace(text)) > 0 {
			if perr := b.addJSON(text); perr != nil {
				return nil, fmt.Errorf("dataset %s:%d: %w", path, line, perr)
			}
		}
		if err == io.EOF {
			break
		}
	}
	return b, nil
}

// open applies the default question and answer fields to opts, validates
// them and opens path.
func open(path string, opts Options, question, answer string) (*os.File, *builder, error) {
	opts = opts.withDefaults(path, question, answer)
	if err := opts.validate(); err != nil {
		return nil, nil, fmt.Errorf("dataset %s: %w", path, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("dataset: %w", err)
	}
	return f, newBuilder(opts), nil
}

func (o Options) validate() error {
	switch o.AnswerRule {
	case AnswerAsIs, AnswerAfterHashes, AnswerLastBoxed, AnswerNoDollars:
	default:
		return fmt.Errorf("unknown AnswerRule %q (want %q, %q, %q or %q)", o.AnswerRule, AnswerAsIs, AnswerAfterHashes, AnswerLastBoxed, AnswerNoDollars)
	}
	for _, p := range []string{o.QuestionField, o.AnswerField} {
		for _, alt := range strings.Split(p, "|") {
			if alt == "" || strings.HasPrefix(alt, ".") || strings.HasSuffix(alt, ".") || strings.Contains(alt, "..") {
				return fmt.Errorf("bad field path %q", p)
			}
		}
	}
	return nil
}

// builder turns decoded records into problems.
type builder struct {
	opts     Options
	problems []task.Problem
	ids      map[string]bool
	skipped  int // records dropped by SkipEmptyAnswers
}

func newBuilder(opts Options) *builder { return &builder{opts: opts, ids: map[string]bool{}} }

// result returns the problems read from path; a file without any (records
// or rows, as what says) is an error, not an empty set.
func (b *builder) result(path, what string) ([]task.Problem, error) {
	if len(b.problems) == 0 {
		return nil, fmt.Errorf("dataset %s: no %s (the file holds no problems)", path, what)
	}
	return b.problems, nil
}

func (b *builder) addJSON(line []byte) error {
	d := json.NewDecoder(bytes.NewReader(line))
	d.UseNumber()
	var rec any
	if err := d.Decode(&rec); err != nil {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	if d.More() {
		return errors.New("more than one JSON value on the line (want one object per line)")
	}
	m, ok := rec.(map[string]any)
	if !ok {
		return fmt.Errorf("got a JSON %s, want an object", kind(rec))
	}
	return b.add(m)
}

// add appends the problem of one record.
func (b *builder) add(rec map[string]any) error {
	o := b.opts
	question, qpath, err := fieldText(rec, o.QuestionField, questionText)
	if err != nil {
		return err
	}
	answerText, apath, err := fieldText(rec, o.AnswerField, scalarText)
	if err != nil {
		return err
	}
	answer, err := applyRule(o.AnswerRule, answerText)
	if errors.Is(err, errEmptyAnswer) && o.SkipEmptyAnswers {
		b.skipped++
		return nil
	}
	if err != nil {
		return fmt.Errorf("field %q: %w", apath, err)
	}
	p := task.Problem{Question: strings.TrimSpace(question), Answer: answer}
	if p.Question == "" {
		return fmt.Errorf("field %q: empty question", qpath)
	}
	if o.SolutionField != "" {
		if p.Solution, _, err = fieldText(rec, o.SolutionField, scalarText); err != nil {
			return err
		}
	}
	id := strconv.Itoa(len(b.problems) + b.skipped) // the record index
	if o.IDField != "" {
		var ipath string
		if id, ipath, err = fieldText(rec, o.IDField, scalarText); err != nil {
			return err
		}
		if b.ids[id] {
			return fmt.Errorf("field %q: duplicate id %q", ipath, id)
		}
		b.ids[id] = true
	}
	p.ID = o.Name + "/" + id
	b.problems = append(b.problems, p)
	return nil
}

// fieldText renders with text the value at the first present of the
// "|"-separated dotted paths, and returns it with the path it came from.
func fieldText(rec map[string]any, paths string, text func(any) (string, error)) (string, string, error) {
	v, path, err := lookupAny(rec, paths)
	if err != nil {
		return "", "", err
	}
	s, err := text(v)
	if err != nil {
		return "", "", fmt.Errorf("field %q: %w", path, err)
	}
	return s, path, nil
}

// lookupAny resolves the first present of the "|"-separated dotted paths.
func lookupAny(rec map[string]any, paths string) (any, string, error) {
	alts := strings.Split(paths, "|")
	for _, path := range alts {
		if v, ok := lookup(rec, path); ok && v != nil {
			return v, path, nil
		}
	}
	if len(alts) > 1 {
		return nil, "", fmt.Errorf("none of the fields %q present", alts)
	}
	return nil, "", fmt.Errorf("field %q missing", paths)
}

// lookup follows a dotted path through nested objects; a number indexes a
// list ("final_answer.0").
func lookup(rec map[string]any, path string) (any, bool) {
	var v any = rec
	for key := range strings.SplitSeq(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[key]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(key)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// scalarText renders a string or number field.
func scalarText(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	case float32:
		return strconv.FormatFloat(float64(x), 'f', -1, 32), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case int32:
		return strconv.FormatInt(int64(x), 10), nil
	case int:
		return strconv.Itoa(x), nil
	case []byte:
		return string(x), nil
	}
	return "", fmt.Errorf("got %s, want a string or number", kind(v))
}

// questionText renders a question: a string, or a chat message list whose
// last user message's content is the question.
func questionText(v any) (string, error) {
	list, ok := v.([]any)
	if !ok {
		return scalarText(v)
	}
	for i := len(list) - 1; i >= 0; i-- {
		msg, ok := list[i].(map[string]any)
		if !ok {
			return "", fmt.Errorf("message %d: got %s, want an object with role and content", i, kind(list[i]))
		}
		if role, _ := msg["role"].(string); role == "user" {
			content, err := scalarText(msg["content"])
			if err != nil {
				return "", fmt.Errorf("message %d content: %w", i, err)
			}
			return content, nil
		}
	}
	return "", errors.New("chat message list has no user message")
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "object"
	case []any:
		return "list"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number, float64, float32, int64, int32, int:
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

// errEmptyAnswer is applyRule's error for a reference answer that comes out
// empty.
var errEmptyAnswer = errors.New("empty answer")

// applyRule derives the reference answer from text.
func applyRule(rule AnswerRule, text string) (string, error) {
	var ans string
	switch rule {
	case AnswerAfterHashes:
		i := strings.LastIndex(text, "####")
		if i < 0 {
			return "", errors.New(`no "####" before the answer`)
		}
		ans = strings.ReplaceAll(text[i+4:], ",", "")
	case AnswerLastBoxed:
		var ok bool
		if ans, ok = LastBoxed(text); !ok {
			return "", errors.New(`no complete \boxed{...}`)
		}
	case AnswerNoDollars:
		ans = noDollars(text)
	default:
		ans = text
	}
	ans = strings.TrimSpace(ans)
	if ans == "" {
		return "", errEmptyAnswer
	}
	return ans, nil
}

// noDollars removes the unescaped $ of s.
func noDollars(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s):
			b.WriteString(s[i : i+2])
			i++
		case s[i] != '$':
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// LastBoxed returns the content of the last \boxed{...} (or \fbox{...}) in s,
// matching braces and skipping escaped ones (\{, \}). An argument without
// braces, "\boxed 2", runs to the next space, $ or line end, as TeX and the
// answer checker (package verify) read it. It reports false when there is
// none or it is not closed.
func LastBoxed(s string) (string, bool) {
	start := max(strings.LastIndex(s, `\boxed`), strings.LastIndex(s, `\fbox`))
	if start < 0 {
		return "", false
	}
	after := strings.TrimPrefix(strings.TrimPrefix(s[start:], `\boxed`), `\fbox`)
	rest := strings.TrimLeft(after, " ")
	if !strings.HasPrefix(rest, "{") {
		if len(rest) == len(after) || rest == "" {
			return "", false
		}
		if stop := strings.IndexAny(rest, " $\n"); stop >= 0 {
			rest = rest[:stop]
		}
		return rest, rest != ""
	}
	depth := 0
	for i := 0; i < len(rest); i++ {
		switch rest[i] {
		case '\\':
			i++ // an escaped character, possibly a brace
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return rest[1:i], true
			}
		}
	}
	return "", false
}
