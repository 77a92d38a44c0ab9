// Package task defines verifiable tasks: sources of problems with reference
// answers and worked solutions, and the reward that checks a response.
//
// A Task hands out problems by (split, index), deterministically for its
// configuration and seed, and scores a response with Reward. Generated tasks
// (arith, countdown) have disjoint train and test splits: a problem belongs to
// the split chosen by a hash of its canonical form, independent of the seed,
// so that no seed can leak a test problem into training.
//
// The answer contract shared by the generated tasks: a response's final
// answer is the text after the last "####" on its line, trimmed of spaces
// (see FinalAnswer). Worked solutions end with that line, e.g. "#### 85".
//
// Tasks are built by name with New; package dataset provides tasks backed by
// fixed problem lists (JSONL, Parquet, the math benchmarks).
package task

import (
	"fmt"
	"strings"
)

// Split names a partition of a task's problems.
type Split string

// The two splits every task knows.
const (
	Train Split = "train"
	Test  Split = "test"
)

// Valid reports whether s is Train or Test.
func (s Split) Valid() bool { return s == Train || s == Test }

// Problem is one task instance.
type Problem struct {
	ID       string // stable and unique within (task, split), e.g. "arith/test/17"
	Question string // the text the agent is asked; prompt templates are applied elsewhere
	Answer   string // the reference final answer
	Solution string // a worked solution in the exact answer format, ending in the answer line
}

// Task is a source of problems and the judge of responses to them.
type Task interface {
	// Name is the task's registry name (or a dataset's name).
	Name() string
	// Problem returns problem index of split; it is deterministic in the
	// task's configuration, seed, split and index. Finite tasks (see Sized)
	// take index modulo their length.
	Problem(split Split, index int) Problem
	// Reward scores response against p: 1 for a correct final answer,
	// otherwise the task's format credit (0 unless configured).
	Reward(p Problem, response string) float64
}

// Sized is implemented by tasks with a finite number of problems per split.
type Sized interface {
	Task
	// Len is the number of distinct problems in split (0 if it has none).
	Len(split Split) int
}

// Extractor is implemented by tasks that can pull a final answer out of a
// response and compare answers, so that answers can be voted on (see
// evalmetric.MajorityAtK).
type Extractor interface {
	Task
	// Extract returns the response's final answer and whether it found one.
	Extract(response string) (answer string, ok bool)
	// Equal reports whether two extracted answers are the same answer
	// (for math, "0.5" and "\frac{1}{2}").
	Equal(a, b string) bool
}

// Len returns the number of problems in split and whether that number is
// finite. Generated tasks are unbounded (finite is false).
func Len(t Task, split Split) (n int, finite bool) {
	if s, ok := t.(Sized); ok {
		return s.Len(split), true
	}
	return 0, false
}

// AnswerMarker starts the final answer line of generated tasks.
const AnswerMarker = "####"

// FinalAnswer returns the text after the last AnswerMarker in response, up to
// the end of that line, with surrounding spaces trimmed. It reports false when
// there is no marker or nothing follows it.
func FinalAnswer(response string) (string, bool) {
	i := strings.LastIndex(response, AnswerMarker)
	if i < 0 {
		return "", false
	}
	rest := response[i+len(AnswerMarker):]
	if j := strings.IndexByte(rest, '\n'); j >= 0 {
		rest = rest[:j]
	}
	rest = strings.TrimSpace(rest)
	return rest, rest != ""
}

// score turns a judgement into a reward: 1 when correct, formatWeight when
// only well formatted, else 0.
func score(correct, wellFormatted bool, formatWeight float64) float64 {
	switch {
	case correct:
		return 1
	case wellFormatted:
		return formatWeight
	}
	return 0
}

// problemID is the conventional problem identifier "name/split/index".
func problemID(name string, split Split, index int) string {
	return fmt.Sprintf("%s/%s/%d", name, split, index)
}
