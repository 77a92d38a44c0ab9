package dataset

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hacrl/hacrl/internal/shared"
	"github.com/hacrl/hacrl/task"
)

// MathSuffix is the instruction the HACPO paper appends to math questions;
// add it with WithSuffix.
const MathSuffix = `Let's think step by step and output the final answer within \boxed{}.`

// Checker judges responses against reference answers. The zero Checker
// stands for package verify's math checker.
type Checker struct {
	// Reward is 1 when response's final answer equals reference, else 0.
	Reward func(response, reference string) float64
	// Extract pulls the final answer out of a response.
	Extract func(response string) (string, bool)
	// Equal reports whether two extracted answers are equal.
	Equal func(a, b string) bool
}

// Dataset is a fixed list of problems per split, usable as a task.Task.
// Problem takes its index modulo the split's length. A Dataset is immutable;
// the With methods return modified copies.
type Dataset struct {
	name         string
	splits       map[task.Split][]task.Problem
	formatWeight float64
	check        Checker
	skipped      int
}

var (
	_ task.Sized     = (*Dataset)(nil)
	_ task.Extractor = (*Dataset)(nil)
)

// New returns the dataset called name with the given problems (either may be
// empty), judged by package verify's math checker.
func New(name string, train, test []task.Problem) *Dataset {
	return &Dataset{name: name, splits: map[task.Split][]task.Problem{
		task.Train: slices.Clone(train),
		task.Test:  slices.Clone(test),
	}}
}

func (d *Dataset) clone() *Dataset {
	c := *d
	c.splits = map[task.Split][]task.Problem{}
	for s, ps := range d.splits {
		c.splits[s] = slices.Clone(ps)
	}
	return &c
}

// WithSuffix returns a copy whose questions end with suffix, after a space
// (e.g. MathSuffix).
func (d *Dataset) WithSuffix(suffix string) *Dataset {
	c := d.clone()
	for _, ps := range c.splits {
		for i := range ps {
			ps[i].Question += " " + suffix
		}
	}
	return c
}

// WithFormatWeight returns a copy whose Reward gives w, in [0, 1), to a wrong
// response that has an extractable final answer. The default is 0.
func (d *Dataset) WithFormatWeight(w float64) (*Dataset, error) {
	if !(w >= 0 && w < 1) {
		return nil, fmt.Errorf("dataset %s: format weight %v out of range [0, 1)", d.name, w)
	}
	c := d.clone()
	c.formatWeight = w
	return c, nil
}

// WithChecker returns a copy judged by c instead of package verify (for
// non-math answers); nil functions keep verify's.
func (d *Dataset) WithChecker(c Checker) *Dataset {
	n := d.clone()
	n.check = c
	return n
}

// Skipped returns how many records of the file were dropped for want of a
// reference answer (see Options.SkipEmptyAnswers).
func (d *Dataset) Skipped() int { return d.skipped }

// Name returns the dataset's name.
func (d *Dataset) Name() string { return d.name }

// Len returns the number of problems in split.
func (d *Dataset) Len(split task.Split) int { return len(d.splits[split]) }

// Problems returns a copy of the problems of split.
func (d *Dataset) Problems(split task.Split) []task.Problem { return slices.Clone(d.splits[split]) }

// Problem returns problem index modulo Len(split). It panics when the split
// is empty; callers check Len (or task.Len) first.
func (d *Dataset) Problem(split task.Split, index int) task.Problem {
	ps := d.splits[split]
	if len(ps) == 0 {
		panic(fmt.Sprintf("dataset %s: no %s problems", d.name, split))
	}
	index %= len(ps)
	if index < 0 {
		index += len(ps)
	}
	return ps[index]
}

// Reward is 1 when the checker judges the response's answer equal to
// p.Answer; otherwise the format weight when an answer can be extracted, else 0.
func (d *Dataset) Reward(p task.Problem, response string) float64 {
	if d.reward()(response, p.Answer) >= 1 {
		return 1
	}
	if d.formatWeight > 0 {
		if _, ok := d.Extract(response); ok {
			return d.formatWeight
		}
	}
	return 0
}

// Extract returns the response's final answer as the checker reads it.
func (d *Dataset) Extract(response string) (string, bool) {
	return d.extract()(response)
}

// Equal reports whether two extracted answers are equal as the checker
// judges them.
func (d *Dataset) Equal(a, b string) bool {
	if d.check.Equal != nil {
		return d.check.Equal(a, b)
	}
	return verifyChecker.Equal(a, b)
}

func (d *Dataset) reward() func(string, string) float64 {
	if d.check.Reward != nil {
		return d.check.Reward
	}
	return verifyChecker.Reward
}

func (d *Dataset) extract() func(string) (string, bool) {
	if d.check.Extract != nil {
		return d.check.Extract
	}
	return verifyChecker.Extract
}

// sharedSet is a data set of the shared data directory that loads by name:
// its file under the data directory and how its records read.
type sharedSet struct {
	file string
	opts Options
}

// sharedSets are the data sets of the shared data directory (its README
// gives every file's fields and reference answers).
var sharedSets = map[string]sharedSet{
	"gsm8k":        {"benchmarks/gsm8k/test.jsonl", Options{QuestionField: "question", AnswerField: "answer", AnswerRule: AnswerAfterHashes, IDField: "idx"}},
	"aime24":       {"benchmarks/aime24/test.jsonl", Options{QuestionField: "problem", AnswerField: "answer", IDField: "id"}},
	"aime25":       {"benchmarks/aime25/test.jsonl", Options{QuestionField: "problem", AnswerField: "answer", IDField: "id"}},
	"amc23":        {"benchmarks/amc23/test.jsonl", Options{QuestionField: "problem|question", AnswerField: "answer", IDField: "id"}},
	"minerva_math": {"benchmarks/minerva_math/test.jsonl", Options{QuestionField: "problem", AnswerField: "solution", AnswerRule: AnswerLastBoxed, IDField: "idx", SolutionField: "solution"}},
	"math500":      {"benchmarks/math500/test.jsonl", Options{QuestionField: "problem", AnswerField: "answer", IDField: "unique_id", SolutionField: "solution"}},
	"math":         {"benchmarks/math/test.jsonl", Options{QuestionField: "problem", AnswerField: "solution", AnswerRule: AnswerLastBoxed, IDField: "unique_id", SolutionField: "solution"}},
	// OlympiadBench: final_answer is a one-element list, often in $...$;
	// several answers are comma-separated; the unit field is not appended.
	"olympiadbench": {"benchmarks/olympiadbench/test.jsonl", Options{QuestionField: "question", AnswerField: "final_answer.0", AnswerRule: AnswerNoDollars, IDField: "id"}},
	// MATH's training split: two solutions end in an empty \boxed{} and are
	// dropped (Dataset.Skipped counts them); "\boxed 2" reads as 2.
	"math_train": {"train/math/train.jsonl", Options{QuestionField: "problem", AnswerField: "solution", AnswerRule: AnswerLastBoxed, IDField: "unique_id", SolutionField: "solution", SkipEmptyAnswers: true}},
}

// Benchmarks returns the names of the data sets of the shared data
// directory, sorted: the math benchmarks and the training set math_train.
// Each loads by name with Benchmark or LoadShared.
func Benchmarks() []string {
	names := make([]string, 0, len(sharedSets))
	for n := range sharedSets {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// IsShared reports whether name is the name of a shared data set.
func IsShared(name string) bool {
	_, ok := sharedSets[name]
	return ok
}

// BenchmarkOptions returns the load options of shared data set name: its
// question and answer fields and answer rule.
func BenchmarkOptions(name string) (Options, error) {
	s, ok := sharedSets[name]
	if !ok {
		return Options{}, fmt.Errorf("dataset: unknown benchmark %q (known: %s)", name, strings.Join(Benchmarks(), ", "))
	}
	o := s.opts
	o.Name = name
	return o, nil
}

// LoadShared reads the problems of shared data set name from the shared data
// directory (found as package internal/shared describes), and how many
// records it dropped for want of a reference answer.
func LoadShared(name string) ([]task.Problem, int, error) {
	opts, err := BenchmarkOptions(name)
	if err != nil {
		return nil, 0, err
	}
	dir, err := shared.Data()
	if err != nil {
		return nil, 0, fmt.Errorf("dataset: %s: %w", name, err)
	}
	b, err := loadJSONL(filepath.Join(dir, filepath.FromSlash(sharedSets[name].file)), opts)
	if err != nil {
		return nil, 0, err
	}
	return b.problems, b.skipped, nil
}

// Benchmark loads shared data set name as a dataset whose test split holds
// all its problems (a training set too: the test split is what evaluation
// reads).
func Benchmark(name string) (*Dataset, error) {
	test, skipped, err := LoadShared(name)
	if err != nil {
		return nil, err
	}
	d := New(name, nil, test)
	d.skipped = skipped
	return d, nil
}
