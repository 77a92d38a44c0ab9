package task

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// Countdown asks for an expression that reaches a target from given numbers
// with +, -, * and /, each number used at most once: "Make 24 from 3 5 8 25".
//
// Many answers are right; Reward evaluates the response's final answer
// (FinalAnswer) with EvalExpression over the problem's numbers and compares
// the value with the target. The generator builds every target from a random
// expression over some of the numbers, so each problem is solvable, and the
// worked solution records that expression one operation per line, with
// positive integer intermediate values, before the answer line:
//
//	25-5=20
//	20+8=28
//	#### 25-5+8
//
// Difficulty is the count of numbers (Options.Numbers) and their range
// (MaxNumber, MaxTarget). With the defaults a solution is at most about 50
// characters.
type Countdown struct {
	opts Options
}

func newCountdown(opts Options) (*Countdown, error) {
	if err := intOption("countdown", "numbers", &opts.Numbers, 4, 3, 6); err != nil {
		return nil, err
	}
	if err := intOption("countdown", "max_number", &opts.MaxNumber, 25, 2, 1000); err != nil {
		return nil, err
	}
	if err := intOption("countdown", "max_target", &opts.MaxTarget, 1000, 10, 1000000); err != nil {
		return nil, err
	}
	return &Countdown{opts: opts}, nil
}

// Name returns "countdown".
func (c *Countdown) Name() string { return "countdown" }

// Options returns the task's options, defaults filled in.
func (c *Countdown) Options() Options { return c.opts }

// Problem returns problem index of split.
func (c *Countdown) Problem(split Split, index int) Problem {
	r := problemRand(c.Name(), c.opts.Seed, split, index)
	p := draw(c.Name(), split, r, c.generate)
	p.ID = problemID(c.Name(), split, index)
	return p
}

// Extract returns the response's final answer expression with spaces removed.
func (c *Countdown) Extract(response string) (string, bool) {
	s, ok := FinalAnswer(response)
	if !ok {
		return "", false
	}
	return strings.Join(strings.Fields(s), ""), true
}

// Equal reports whether two extracted expressions are the same text up to
// spaces. (Different correct expressions are different answers.)
func (c *Countdown) Equal(x, y string) bool {
	return strings.Join(strings.Fields(x), "") == strings.Join(strings.Fields(y), "")
}

// Reward is 1 when the final answer is an expression over p's numbers whose
// value is p's target; FormatWeight when it is a valid expression over the
// numbers with another value; else 0.
func (c *Countdown) Reward(p Problem, response string) float64 {
	target, numbers, err := ParseCountdown(p.Question)
	if err != nil {
		return 0
	}
	expr, ok := FinalAnswer(response)
	if !ok {
		return 0
	}
	v, err := EvalExpression(expr, numbers, c.opts.Fractions)
	if err != nil {
		return 0
	}
	return score(v.Cmp(new(big.Rat).SetInt64(int64(target))) == 0, true, c.opts.FormatWeight)
}

// countdownQuestion writes the question for target and numbers.
func countdownQuestion(target int, numbers []int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Make %d from", target)
	for _, n := range numbers {
		fmt.Fprintf(&b, " %d", n)
	}
	return b.String()
}

// ParseCountdown reads a countdown question, "Make <target> from <n1> <n2> ...".
func ParseCountdown(question string) (target int, numbers []int, err error) {
	f := strings.Fields(question)
	if len(f) < 4 || f[0] != "Make" || f[2] != "from" {
		return 0, nil, fmt.Errorf("countdown question %q: want \"Make <target> from <numbers...>\"", question)
	}
	if target, err = strconv.Atoi(f[1]); err != nil {
		return 0, nil, fmt.Errorf("countdown question %q: target: %w", question, err)
	}
	for _, s := range f[3:] {
		n, err := strconv.Atoi(s)
		if err != nil {
			return 0, nil, fmt.Errorf("countdown question %q: number: %w", question, err)
		}
		numbers = append(numbers, n)
	}
	return target, numbers, nil
}

// cdNode is an expression tree node: a leaf number (op 0) or l op r.
type cdNode struct {
	op    byte
	value int
	l, r  *cdNode
}

func prec(op byte) int {
	switch op {
	case '+', '-':
		return 1
	case '*', '/':
		return 2
	}
	return 3
}

// String writes the expression with the parentheses precedence requires.
func (n *cdNode) String() string {
	if n.op == 0 {
		return strconv.Itoa(n.value)
	}
	l, r := n.l.String(), n.r.String()
	if prec(n.l.op) < prec(n.op) {
		l = "(" + l + ")"
	}
	// A right operand of equal precedence keeps its parentheses unless both
	// operators are the same associative one.
	if p := prec(n.r.op); p < prec(n.op) || p == prec(n.op) && !(n.op == n.r.op && (n.op == '+' || n.op == '*')) {
		r = "(" + r + ")"
	}
	return l + string(n.op) + r
}

// generate draws one problem (without ID) and its canonical form.
func (c *Countdown) generate(r *rand.Rand) (Problem, string) {
	n := c.opts.Numbers
	for {
		numbers := make([]int, n)
		for i := range numbers {
			numbers[i] = 1 + r.IntN(c.opts.MaxNumber)
		}
		used := max(2, n-2) + r.IntN(n-max(2, n-2)+1)
		pool := make([]*cdNode, used)
		for i, j := range r.Perm(n)[:used] {
			pool[i] = &cdNode{value: numbers[j]}
		}
		var steps []string
		for len(pool) > 1 {
			i := r.IntN(len(pool))
			j := r.IntN(len(pool) - 1)
			if j >= i {
				j++
			}
			node := combine(r, pool[i], pool[j])
			steps = append(steps, fmt.Sprintf("%d%c%d=%d", node.l.value, node.op, node.r.value, node.value))
			pool[i] = node
			pool = slices.Delete(pool, j, j+1)
		}
		target := pool[0].value
		if target > c.opts.MaxTarget || slices.Contains(numbers, target) {
			continue
		}
		expr := pool[0].String()
		sorted := slices.Clone(numbers)
		slices.Sort(sorted)
		canonical := fmt.Sprint(sorted, target)
		return Problem{
			Question: countdownQuestion(target, numbers),
			Answer:   expr,
			Solution: strings.Join(append(steps, AnswerMarker+" "+expr), "\n"),
		}, canonical
	}
}

// combine applies to a and b a random operator whose result is a positive
// integer ("+" always qualifies). Trivial steps (×1, ÷1) are avoided.
func combine(r *rand.Rand, a, b *cdNode) *cdNode {
	for _, k := range r.Perm(4) {
		op := "+-*/"[k]
		var v int
		switch op {
		case '+':
			v = a.value + b.value
		case '-':
			if a.value <= b.value {
				continue
			}
			v = a.value - b.value
		case '*':
			if a.value == 1 || b.value == 1 {
				continue
			}
			v = a.value * b.value
		case '/':
			if b.value <= 1 || a.value%b.value != 0 {
				continue
			}
			v = a.value / b.value
		}
		return &cdNode{op: op, value: v, l: a, r: b}
	}
	panic("unreachable: + always combines")
}
