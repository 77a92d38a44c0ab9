package task

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Arith is integer arithmetic: expressions of Ops operations over "+", "-"
// and "*" with the usual precedence, e.g. "47+38" or "12+47*3".
//
// Every intermediate and final value is non-negative (the generator redraws
// otherwise). The worked solution has one line per binary operation, in
// evaluation order (products first, then sums and differences from left to
// right), working column by column from the right:
//
//	47+38:7+8=15;4+3+1=8;=85      addition, "+1" is the carry
//	52-38:12-8=4;5-1-3=1;=14      subtraction, "12" borrows, "-1" repays it
//	47*8:7*8=56;4*8+5=37;=376     multiplication by one digit, "+5" the carry
//	#### 85                       the final answer line
//
// Shorter operands are padded with zeros in the columns. A multiplier of
// several digits gets one line per digit followed by the additions of the
// shifted partial products. With the default options a solution is at most
// about 40 characters.
//
// Reward takes the final answer (FinalAnswer) as a signed integer and compares
// its value exactly with the reference.
type Arith struct {
	opts Options
}

func newArith(opts Options) (*Arith, error) {
	if err := intOption("arith", "digits", &opts.Digits, 2, 1, 12); err != nil {
		return nil, err
	}
	if err := intOption("arith", "ops", &opts.Ops, 1, 1, 4); err != nil {
		return nil, err
	}
	if err := intOption("arith", "mul_digits", &opts.MulDigits, 1, 1, 3); err != nil {
		return nil, err
	}
	if opts.Operators == "" {
		opts.Operators = "+-*"
	}
	for _, c := range opts.Operators {
		if !strings.ContainsRune("+-*", c) || strings.Count(opts.Operators, string(c)) > 1 {
			return nil, &OptionError{Task: "arith", Option: "operators", Reason: fmt.Sprintf("must be a non-empty subset of \"+-*\" without repeats, got %q", opts.Operators)}
		}
	}
	return &Arith{opts: opts}, nil
}

// Name returns "arith".
func (a *Arith) Name() string { return "arith" }

// Options returns the task's options, defaults filled in.
func (a *Arith) Options() Options { return a.opts }

// Problem returns problem index of split.
func (a *Arith) Problem(split Split, index int) Problem {
	r := problemRand(a.Name(), a.opts.Seed, split, index)
	p := draw(a.Name(), split, r, func(r *rand.Rand) (Problem, string) {
		p := a.generate(r)
		return p, p.Question
	})
	p.ID = problemID(a.Name(), split, index)
	return p
}

// Extract returns the response's final answer as a canonical integer
// ("-12", "0", "85").
func (a *Arith) Extract(response string) (string, bool) {
	s, ok := FinalAnswer(response)
	if !ok {
		return "", false
	}
	return canonicalInt(s)
}

// Equal reports whether two extracted answers are the same integer.
func (a *Arith) Equal(x, y string) bool {
	cx, okx := canonicalInt(x)
	cy, oky := canonicalInt(y)
	return okx && oky && cx == cy
}

// Reward is 1 when the final answer equals p.Answer as an integer, else
// FormatWeight when the final answer line holds an integer, else 0.
func (a *Arith) Reward(p Problem, response string) float64 {
	got, ok := a.Extract(response)
	want, _ := canonicalInt(p.Answer)
	return score(ok && got == want, ok, a.opts.FormatWeight)
}

// canonicalInt validates s as an optionally negative decimal integer and
// returns it without leading zeros ("-0" becomes "0").
func canonicalInt(s string) (string, bool) {
	neg := strings.HasPrefix(s, "-")
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return "", false
	}
	digits = trimZeros(digits)
	if neg && digits != "0" {
		return "-" + digits, true
	}
	return digits, true
}

// generate draws one problem (without ID) with all values non-negative.
func (a *Arith) generate(r *rand.Rand) Problem {
	for {
		ops := make([]byte, a.opts.Ops)
		nums := make([]string, a.opts.Ops+1)
		nums[0] = randDigits(r, a.opts.Digits)
		for i := range ops {
			ops[i] = a.opts.Operators[r.IntN(len(a.opts.Operators))]
			n := a.opts.Digits
			if ops[i] == '*' {
				n = a.opts.MulDigits
			}
			nums[i+1] = randDigits(r, n)
		}
		if p, ok := arithSolve(nums, ops); ok {
			return p
		}
	}
}

// arithSolve evaluates nums[0] ops[0] nums[1] ... and writes the worked
// solution. It reports false when a difference would be negative.
func arithSolve(nums []string, ops []byte) (Problem, bool) {
	var q strings.Builder
	q.WriteString(nums[0])
	for i, op := range ops {
		q.WriteByte(op)
		q.WriteString(nums[i+1])
	}
	var lines []string
	// Products first: fold each run of multiplications into one term.
	terms := []string{nums[0]}
	var signs []byte
	for i, op := range ops {
		if op == '*' {
			last := len(terms) - 1
			prod, work := mulWork(terms[last], nums[i+1])
			lines = append(lines, work...)
			terms[last] = prod
			continue
		}
		terms = append(terms, nums[i+1])
		signs = append(signs, op)
	}
	acc := terms[0]
	for i, op := range signs {
		var line string
		if op == '+' {
			acc, line = addWork(acc, terms[i+1])
		} else {
			if cmpDigits(acc, terms[i+1]) < 0 {
				return Problem{}, false
			}
			acc, line = subWork(acc, terms[i+1])
		}
		lines = append(lines, line)
	}
	lines = append(lines, AnswerMarker+" "+acc)
	return Problem{Question: q.String(), Answer: acc, Solution: strings.Join(lines, "\n")}, true
}

// randDigits returns a uniformly drawn n-digit number (0..9 for n = 1).
func randDigits(r *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		lo := 0
		if i == 0 && n > 1 {
			lo = 1
		}
		b[i] = byte('0' + lo + r.IntN(10-lo))
	}
	return string(b)
}

// digitAt returns the i-th digit of s counting from the right, 0 past its end.
func digitAt(s string, i int) int {
	if i >= len(s) {
		return 0
	}
	return int(s[len(s)-1-i] - '0')
}

func trimZeros(s string) string {
	s = strings.TrimLeft(s, "0")
	if s == "" {
		return "0"
	}
	return s
}

// cmpDigits compares two non-negative decimal strings without leading zeros.
func cmpDigits(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

// reverseDigits builds a number from digits listed least significant first.
func reverseDigits(d []byte) string {
	b := make([]byte, len(d))
	for i, c := range d {
		b[len(d)-1-i] = c
	}
	return trimZeros(string(b))
}

// addWork returns a+b and its worked line.
func addWork(a, b string) (string, string) {
	sum, cols := carryColumns(max(len(a), len(b)), func(i, carry int) (int, string) {
		x, y := digitAt(a, i), digitAt(b, i)
		v := x + y + carry
		return v, fmt.Sprintf("%d+%d%s=%d", x, y, carryTerm(carry), v)
	})
	return sum, workLine(a+"+"+b, cols, sum)
}

// carryColumns works n columns from the right: col returns a column's value
// given the incoming carry, and its text; the value's last digit is the
// result digit and the rest carries on.
func carryColumns(n int, col func(i, carry int) (int, string)) (string, []string) {
	cols := make([]string, 0, n)
	var out []byte
	carry := 0
	for i := range n {
		v, text := col(i, carry)
		cols = append(cols, text)
		out = append(out, byte('0'+v%10))
		carry = v / 10
	}
	if carry > 0 {
		out = append(out, byte('0'+carry))
	}
	return reverseDigits(out), cols
}

// carryTerm writes an incoming carry as "+c", or nothing when it is 0.
func carryTerm(carry int) string {
	if carry == 0 {
		return ""
	}
	return fmt.Sprintf("+%d", carry)
}

// subWork returns a-b (a >= b) and its worked line.
func subWork(a, b string) (string, string) {
	cols := make([]string, 0, len(a))
	var out []byte
	borrow := 0
	for i := range len(a) {
		x, y := digitAt(a, i), digitAt(b, i)
		top := x
		next := 0
		if x-borrow-y < 0 {
			top += 10
			next = 1
		}
		d := top - borrow - y
		if borrow > 0 {
			cols = append(cols, fmt.Sprintf("%d-1-%d=%d", top, y, d))
		} else {
			cols = append(cols, fmt.Sprintf("%d-%d=%d", top, y, d))
		}
		out = append(out, byte('0'+d))
		borrow = next
	}
	diff := reverseDigits(out)
	return diff, workLine(a+"-"+b, cols, diff)
}

// mulWork returns a*b and its worked lines: one per digit of b, then the
// additions of the shifted partial products.
func mulWork(a, b string) (string, []string) {
	var lines []string
	var acc string
	for j := range len(b) {
		d := digitAt(b, j)
		p, line := mulDigitWork(a, d)
		lines = append(lines, line)
		if p != "0" {
			p += strings.Repeat("0", j)
		}
		if j == 0 {
			acc = p
			continue
		}
		var add string
		acc, add = addWork(acc, p)
		lines = append(lines, add)
	}
	return acc, lines
}

// mulDigitWork returns a*d for a single digit d and its worked line.
func mulDigitWork(a string, d int) (string, string) {
	prod, cols := carryColumns(len(a), func(i, carry int) (int, string) {
		x := digitAt(a, i)
		v := x*d + carry
		return v, fmt.Sprintf("%d*%d%s=%d", x, d, carryTerm(carry), v)
	})
	return prod, workLine(fmt.Sprintf("%s*%d", a, d), cols, prod)
}

func workLine(head string, cols []string, result string) string {
	return head + ":" + strings.Join(cols, ";") + ";=" + result
}
