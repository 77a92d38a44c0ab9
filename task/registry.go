package task

import (
	"fmt"
	"slices"
	"strings"
)

// Options configures a generated task. Zero fields take the defaults noted;
// fields that do not concern the named task are ignored.
type Options struct {
	// Seed selects the problem sequence; splits do not depend on it.
	Seed uint64
	// FormatWeight is the reward of a wrong but well-formatted response
	// (a parseable final answer line), in [0, 1). Default 0: the reward is
	// 1 for a correct answer and 0 otherwise.
	FormatWeight float64

	// Digits is the number of digits of each arith operand, 1..12 (default 2).
	Digits int
	// Ops is the number of arith operations per problem, 1..4 (default 1).
	Ops int
	// Operators is the set of arith operators to draw from, a non-empty
	// subset of "+-*" (default "+-*").
	Operators string
	// MulDigits is the number of digits of each arith multiplier, 1..3
	// (default 1). Multiplicands have Digits digits.
	MulDigits int

	// Numbers is how many numbers a countdown problem gives, 3..6 (default 4).
	Numbers int
	// MaxNumber bounds the countdown numbers, drawn from 1..MaxNumber,
	// 2..1000 (default 25).
	MaxNumber int
	// MaxTarget bounds the countdown target, 1..MaxTarget, 10..1000000
	// (default 1000).
	MaxTarget int
	// Fractions lets countdown expressions pass through non-integer
	// intermediate values (e.g. (1/3)*6). Default false: every division
	// must be exact, as in the game.
	Fractions bool
}

// Names returns the names New accepts, sorted.
func Names() []string {
	names := []string{"arith", "countdown"}
	slices.Sort(names)
	return names
}

// New returns the generated task called name, configured by opts. Bad
// options give an error that names the field and its accepted range.
func New(name string, opts Options) (Task, error) {
	if opts.FormatWeight < 0 || opts.FormatWeight >= 1 || opts.FormatWeight != opts.FormatWeight {
		return nil, &OptionError{Task: name, Option: "format_weight", Reason: fmt.Sprintf("must be in [0, 1), got %v", opts.FormatWeight)}
	}
	switch name {
	case "arith":
		return newArith(opts)
	case "countdown":
		return newCountdown(opts)
	}
	return nil, fmt.Errorf("task: unknown task %q (known: %s)", name, strings.Join(Names(), ", "))
}

// An OptionError is an option New refuses: the task, the option by its
// config key (digits, max_number, ...) and what is wrong with its value.
type OptionError struct {
	Task, Option, Reason string
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("task %s: %s %s", e.Task, e.Option, e.Reason)
}

// intOption applies a default to a zero option and checks its range.
func intOption(task, option string, v *int, def, lo, hi int) error {
	if *v == 0 {
		*v = def
	}
	if *v < lo || *v > hi {
		return &OptionError{Task: task, Option: option, Reason: fmt.Sprintf("must be in %d..%d, got %d", lo, hi, *v)}
	}
	return nil
}
