package task

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// Limits of EvalExpression: longer or deeper inputs are rejected unparsed.
const (
	MaxExpressionLen   = 256 // bytes
	MaxExpressionDepth = 16  // nested parentheses
	maxNumberDigits    = 9
)

// Errors of EvalExpression, wrapped with detail; test with errors.Is.
var (
	ErrSyntax     = errors.New("malformed expression")
	ErrNumber     = errors.New("number not available")
	ErrDivideZero = errors.New("division by zero")
	ErrNonInteger = errors.New("non-integer intermediate value")
	ErrTooComplex = errors.New("expression too long or too deep")
)

// EvalExpression evaluates an arithmetic expression over +, -, *, / and
// parentheses (spaces allowed; "x", "×" and "÷" are accepted for * and /)
// exactly, with rational arithmetic. Every number in it must be one of
// numbers, each used at most as often as it appears there; there is no unary
// minus. Unless fractions is true, every division must come out even, so all
// intermediate values are integers.
func EvalExpression(expr string, numbers []int, fractions bool) (*big.Rat, error) {
	if len(expr) > MaxExpressionLen {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrTooComplex, len(expr), MaxExpressionLen)
	}
	p := exprParser{src: []rune(expr), fractions: fractions, avail: map[int]int{}}
	for _, n := range numbers {
		p.avail[n]++
	}
	v, err := p.binary(0, 0)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos < len(p.src) {
		return nil, fmt.Errorf("%w: unexpected %q at %d", ErrSyntax, p.src[p.pos], p.pos)
	}
	return v, nil
}

type exprParser struct {
	src       []rune
	pos       int
	fractions bool
	avail     map[int]int
}

func (p *exprParser) skipSpace() {
	for p.pos < len(p.src) && (p.src[p.pos] == ' ' || p.src[p.pos] == '\t') {
		p.pos++
	}
}

// peekOp returns the canonical operator at the cursor (one of "+-*/"), or 0.
func (p *exprParser) peekOp() rune {
	p.skipSpace()
	if p.pos >= len(p.src) {
		return 0
	}
	switch c := p.src[p.pos]; c {
	case '+', '-', '*', '/':
		return c
	case 'x', '×':
		return '*'
	case '÷':
		return '/'
	}
	return 0
}

// operators lists the binary operators by precedence level, loosest first.
var operators = [...]string{"+-", "*/"}

// binary parses operands of precedence level joined by that level's
// operators, left to right.
func (p *exprParser) binary(depth, level int) (*big.Rat, error) {
	operand := func() (*big.Rat, error) {
		if level+1 < len(operators) {
			return p.binary(depth, level+1)
		}
		return p.factor(depth)
	}
	v, err := operand()
	if err != nil {
		return nil, err
	}
	for {
		op := p.peekOp()
		if op == 0 || !strings.ContainsRune(operators[level], op) {
			return v, nil
		}
		p.pos++
		w, err := operand()
		if err != nil {
			return nil, err
		}
		if err := p.apply(v, op, w); err != nil {
			return nil, err
		}
	}
}

// apply sets v to v op w.
func (p *exprParser) apply(v *big.Rat, op rune, w *big.Rat) error {
	switch op {
	case '+':
		v.Add(v, w)
	case '-':
		v.Sub(v, w)
	case '*':
		v.Mul(v, w)
	case '/':
		if w.Sign() == 0 {
			return ErrDivideZero
		}
		v.Quo(v, w)
		if !p.fractions && !v.IsInt() {
			return fmt.Errorf("%w: %s", ErrNonInteger, v.RatString())
		}
	}
	return nil
}

func (p *exprParser) factor(depth int) (*big.Rat, error) {
	p.skipSpace()
	if p.pos >= len(p.src) {
		return nil, fmt.Errorf("%w: ends where a number or ( was expected", ErrSyntax)
	}
	if c := p.src[p.pos]; c == '(' {
		if depth >= MaxExpressionDepth {
			return nil, fmt.Errorf("%w: more than %d nested parentheses", ErrTooComplex, MaxExpressionDepth)
		}
		p.pos++
		v, err := p.binary(depth+1, 0)
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.pos >= len(p.src) || p.src[p.pos] != ')' {
			return nil, fmt.Errorf("%w: missing ) at %d", ErrSyntax, p.pos)
		}
		p.pos++
		return v, nil
	}
	start := p.pos
	for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
		p.pos++
	}
	if p.pos == start {
		return nil, fmt.Errorf("%w: unexpected %q at %d", ErrSyntax, p.src[start], start)
	}
	text := string(p.src[start:p.pos])
	if len(text) > maxNumberDigits {
		return nil, fmt.Errorf("%w: %s is not one of the numbers", ErrNumber, text)
	}
	n, _ := strconv.Atoi(text)
	if text != strconv.Itoa(n) {
		return nil, fmt.Errorf("%w: %s has leading zeros", ErrSyntax, text)
	}
	if p.avail[n] == 0 {
		return nil, fmt.Errorf("%w: %d is not given or already used", ErrNumber, n)
	}
	p.avail[n]--
	return new(big.Rat).SetInt64(int64(n)), nil
}
