package verify

import (
	"math/big"
	"regexp"
	"strings"
)

// Tolerances. Decimal literals are compared like the Qwen2.5-Math grader,
// within a relative 1e-4; exact forms (integers, fractions, radicals,
// symbols) must agree to floating-point precision.
const (
	decimalRelTol  = 1e-4
	symbolicRelTol = 1e-9
	symbolicAbsTol = 1e-12
	ratioRelTol    = 1e-6
	samplePoints   = 6
	maxElements    = 32
	maxPMVariants  = 16
)

// Equal reports whether the extracted answer equals the reference answer.
// Both are normalized and parsed; numbers are compared exactly or within the
// decimal tolerance, expressions by evaluation at sample points, and
// tuples, intervals, sets, equations and matrices by structure. An answer
// written as a percentage also matches its value divided by 100 ("50\%" and
// "0.5") and the bare number ("50\%" and "50"). Equal never panics; inputs
// longer than MaxAnswerLen are not equal.
func Equal(answer, reference string) (eq bool) {
	defer func() {
		if recover() != nil {
			eq = false
		}
	}()
	return equalStrings(answer, reference)
}

// equalStrings is Equal without the recover, so that tests and fuzzing see
// any panic.
func equalStrings(answer, reference string) bool {
	if len(answer) > MaxAnswerLen || len(reference) > MaxAnswerLen {
		return false
	}
	a, r := strings.TrimSpace(answer), strings.TrimSpace(reference)
	if a == "" || r == "" {
		return false
	}
	if a == r {
		return true
	}
	na, nr := Normalize(a), Normalize(r)
	if na == "" || nr == "" {
		return false
	}
	if na == nr {
		return true
	}
	la, okA := choiceLetter(na)
	lr, okR := choiceLetter(nr)
	if okA && okR {
		return la == lr
	}
	ta, errA := parse(na)
	tr, errR := parse(nr)
	if errA != nil || errR != nil {
		// Unparseable text can only match itself, up to spacing.
		return strings.ReplaceAll(na, " ", "") == strings.ReplaceAll(nr, " ", "")
	}
	return (&checker{left: workBudget}).equalTrees(ta, tr)
}

// workBudget bounds the work of one comparison, in evaluated nodes and
// machine words of exact arithmetic; a comparison that runs out is not equal.
const workBudget = 1 << 21

// checker carries the remaining work budget of one comparison.
type checker struct{ left int }

// spend takes k units of work, reporting false once the budget is gone.
func (c *checker) spend(k int) bool {
	c.left -= k + 1
	return c.left >= 0
}

// EqualResponse extracts the final answer from a model's response and
// reports whether it equals the reference answer.
func EqualResponse(response, reference string) bool {
	ans, ok := Extract(response)
	return ok && Equal(ans, reference)
}

// EqualAnswer is for answers given by a person or a file, which may be a bare
// answer ("\frac{1}{2}") or a whole response ("… so \boxed{0.5}."). An answer
// the text marks (\boxed, "the answer is", "####") is compared when there is
// one; otherwise the text as written; and only a text that reads as a
// sentence (a word of three or more letters outside LaTeX commands) falls
// back to its last number. Extract alone would take a bare "\frac{1}{2}" for
// a response and keep only its last number, judging it equal to 2.
func EqualAnswer(answer, reference string) (eq bool) {
	defer func() {
		if recover() != nil {
			eq = false
		}
	}()
	if len(answer) > MaxResponseLen {
		answer = answer[len(answer)-MaxResponseLen:]
	}
	if a, ok := extractMarked(answer); ok {
		return Equal(a, reference)
	}
	if Equal(answer, reference) {
		return true
	}
	if sentenceWordRe.MatchString(answer) {
		return EqualResponse(answer, reference)
	}
	return false
}

// sentenceWordRe matches a plain word of three or more letters that is not
// a LaTeX command: the mark of prose rather than a bare answer.
var sentenceWordRe = regexp.MustCompile(`(?:^|[^\\a-zA-Z])[a-zA-Z]{3,}`)

// Reward is the binary verifiable reward for a math problem: 1 when the
// answer extracted from response equals reference, else 0.
func Reward(response, reference string) float64 {
	if EqualResponse(response, reference) {
		return 1
	}
	return 0
}

// choiceLetter recognizes a multiple-choice answer: A–E, optionally in
// parentheses.
func choiceLetter(s string) (byte, bool) {
	s = strings.TrimSuffix(strings.TrimPrefix(s, "("), ")")
	s = strings.TrimSpace(s)
	if len(s) == 1 && s[0] >= 'A' && s[0] <= 'E' {
		return s[0], true
	}
	return 0, false
}

// equalTrees compares two parsed answers, letting a percentage on one side
// (negative ones too: "-5\%") also match its bare number on the other.
func (c *checker) equalTrees(a, b *node) bool {
	if c.equalAny(a, b) {
		return true
	}
	pa, okA := percentOf(a)
	pb, okB := percentOf(b)
	switch {
	case okA && !okB:
		return c.equalAny(pa, b)
	case okB && !okA:
		return c.equalAny(a, pb)
	}
	return false
}

// percentOf returns the number a percentage is written with: x for x\%,
// -x for -x\%; false for anything else.
func percentOf(n *node) (*node, bool) {
	switch {
	case n.op == opPct:
		return n.kids[0], true
	case n.op == opNeg && n.kids[0].op == opPct:
		return mk(opNeg, n.kids[0].kids[0]), true
	}
	return nil, false
}

// equalAny compares answers that may be unordered collections: sets, lists
// of solutions, and expressions with ±.
func (c *checker) equalAny(a, b *node) bool {
	if !c.spend(1) {
		return false
	}
	ea, ua := elements(a)
	eb, ub := elements(b)
	if ua || ub {
		return c.matchUnordered(ea, eb)
	}
	return c.equalOne(a, b)
}

// elements returns the members of an unordered collection (with ± expanded)
// and true, or n itself and false.
func elements(n *node) ([]*node, bool) {
	if n.op == opSet {
		var out []*node
		for _, k := range n.kids {
			out = append(out, expandPM(k)...)
		}
		return out, true
	}
	if hasPM(n) {
		return expandPM(n), true
	}
	return []*node{n}, false
}

func hasPM(n *node) bool {
	if n.op == opPM {
		return true
	}
	if n.op == opSet || n.op == opTuple || n.op == opMatrix {
		return false // expanded inside, member by member
	}
	for _, k := range n.kids {
		if hasPM(k) {
			return true
		}
	}
	return false
}

// expandPM returns the variants of n with each ± replaced by + and by −.
// Too many variants yield nil, which matches nothing.
func expandPM(n *node) []*node {
	if !hasPM(n) {
		return []*node{n}
	}
	if n.op == opPM {
		var out []*node
		for _, l := range expandPM(n.kids[0]) {
			for _, r := range expandPM(n.kids[1]) {
				if n.sign > 0 {
					out = append(out, mk(opAdd, l, r), mk(opSub, l, r))
				} else {
					out = append(out, mk(opSub, l, r), mk(opAdd, l, r))
				}
			}
		}
		if len(out) > maxPMVariants {
			return nil
		}
		return out
	}
	variants := []*node{{op: n.op, num: n.num, name: n.name, sign: n.sign, dec: n.dec, frac: n.frac}}
	for i, k := range n.kids {
		kv := expandPM(k)
		var next []*node
		for _, v := range variants {
			for _, x := range kv {
				c := *v
				c.kids = append(append([]*node(nil), v.kids[:i]...), x)
				next = append(next, &c)
			}
		}
		if len(next) > maxPMVariants {
			return nil
		}
		variants = next
	}
	return variants
}

// matchUnordered reports whether xs and ys can be paired one to one with
// equal members (a perfect bipartite matching, by augmenting paths).
func (c *checker) matchUnordered(xs, ys []*node) bool {
	if len(xs) != len(ys) || len(xs) == 0 || len(xs) > maxElements {
		return false
	}
	n := len(xs)
	eq := make([][]bool, n)
	for i := range xs {
		eq[i] = make([]bool, n)
		any := false
		for j := range ys {
			eq[i][j] = c.equalOne(xs[i], ys[j])
			any = any || eq[i][j]
		}
		if !any {
			return false
		}
	}
	owner := make([]int, n) // owner[j] = index in xs matched to ys[j], or -1
	for j := range owner {
		owner[j] = -1
	}
	var try func(i int, seen []bool) bool
	try = func(i int, seen []bool) bool {
		for j := range n {
			if eq[i][j] && !seen[j] {
				seen[j] = true
				if owner[j] < 0 || try(owner[j], seen) {
					owner[j] = i
					return true
				}
			}
		}
		return false
	}
	for i := range n {
		if !try(i, make([]bool, n)) {
			return false
		}
	}
	return true
}

// equalOne compares two members: equations, tuples and intervals, matrices,
// unions, inequalities, or scalar expressions.
func (c *checker) equalOne(a, b *node) bool {
	switch {
	case a.op == opSet || b.op == opSet || hasPM(a) || hasPM(b):
		return c.equalAny(a, b)
	case a.op == opEq && b.op == opEq:
		return c.equalEquations(a, b)
	case a.op == opEq:
		return simpleLHS(a.kids[0]) && c.equalAny(a.kids[1], b)
	case b.op == opEq:
		return simpleLHS(b.kids[0]) && c.equalAny(a, b.kids[1])
	case a.op == opTuple || b.op == opTuple:
		if a.op != b.op || a.open != b.open || a.close != b.close || len(a.kids) != len(b.kids) {
			return false
		}
		for i := range a.kids {
			if !c.equalAny(a.kids[i], b.kids[i]) {
				return false
			}
		}
		return true
	case a.op == opMatrix || b.op == opMatrix:
		if a.op != b.op || len(a.rows) != len(b.rows) || len(a.rows[0]) != len(b.rows[0]) {
			return false
		}
		for i, row := range a.rows {
			for j := range row {
				if !c.equalAny(row[j], b.rows[i][j]) {
					return false
				}
			}
		}
		return true
	case a.op == opUnion || b.op == opUnion:
		return a.op == b.op && c.matchUnordered(a.kids, b.kids)
	case a.op == opRel || b.op == opRel:
		if a.op != b.op {
			return false
		}
		if a.name == b.name && c.equalAny(a.kids[0], b.kids[0]) && c.equalAny(a.kids[1], b.kids[1]) {
			return true
		}
		flip := map[string]string{"lt": "gt", "gt": "lt", "le": "ge", "ge": "le", "ne": "ne"}
		return flip[a.name] == b.name && c.equalAny(a.kids[0], b.kids[1]) && c.equalAny(a.kids[1], b.kids[0])
	}
	return c.equalScalar(a, b)
}

// simpleLHS reports whether an equation's left side only names the answer:
// a variable (x = 3), a function value (f(2) = 3) or a derivative
// (\frac{dy}{dx} = ...).
func simpleLHS(n *node) bool {
	switch n.op {
	case opVar, opApply:
		return true
	case opDiv:
		isD := func(k *node) bool {
			return k.op == opMul && k.kids[0].op == opVar && k.kids[0].name == "d" && k.kids[1].op == opVar
		}
		return isD(n.kids[0]) && isD(n.kids[1])
	}
	return false
}

// equalEquations reports whether two equations are the same up to moving
// terms and scaling: lhs₁−rhs₁ is a nonzero constant multiple of lhs₂−rhs₂.
func (c *checker) equalEquations(a, b *node) bool {
	if c.equalAny(a.kids[0], b.kids[0]) && c.equalAny(a.kids[1], b.kids[1]) {
		return true
	}
	f, g := mk(opSub, a.kids[0], a.kids[1]), mk(opSub, b.kids[0], b.kids[1])
	if structural(f.kids[0]) || structural(f.kids[1]) || structural(g.kids[0]) || structural(g.kids[1]) {
		return false
	}
	rel := ratioRelTol
	if f.dec || g.dec {
		rel = decimalRelTol
	}
	names := sortedVars(f, g)
	e := &env{names: names, vals: make([]complex128, len(names)), c: c}
	var ratio complex128
	haveRatio := false
	for k := range samplePoints {
		for i, name := range names {
			e.vals[i] = pointValue(name, k)
		}
		fv, gv := eval(f, e), eval(g, e)
		if !finite(fv) || !finite(gv) {
			return false
		}
		fz, gz := abs2(fv) < symbolicAbsTol, abs2(gv) < symbolicAbsTol
		switch {
		case fz && gz:
			continue
		case fz != gz:
			return false
		}
		r := fv / gv
		if !haveRatio {
			ratio, haveRatio = r, true
		} else if !closeTo(r, ratio, rel, 0) {
			return false
		}
		if len(names) == 0 {
			break
		}
	}
	return c.left >= 0
}

func abs2(z complex128) float64 {
	return max(real(z), -real(z), imag(z), -imag(z))
}

// structural reports whether n is not a single scalar expression.
func structural(n *node) bool {
	switch n.op {
	case opSet, opTuple, opMatrix, opEq, opRel, opUnion, opPM:
		return true
	}
	return false
}

// equalScalar compares two scalar expressions: exactly when both are
// rational, else by evaluation at sample points.
func (c *checker) equalScalar(a, b *node) bool {
	if structural(a) || structural(b) {
		return false
	}
	dec := a.dec || b.dec
	ra, okA := exact(a, c)
	rb, okB := exact(b, c)
	if okA && okB {
		if ra.Cmp(rb) == 0 {
			return true
		}
		if !dec {
			return false
		}
		fa, _ := ra.Float64()
		fb, _ := rb.Float64()
		return closeTo(complex(fa, 0), complex(fb, 0), decimalRelTol, 0) && roundsAlike(a, b, ra, rb)
	}
	rel, abs := symbolicRelTol, symbolicAbsTol
	if dec {
		rel, abs = decimalRelTol, 0
	}
	names := sortedVars(a, b)
	points := samplePoints
	if len(names) == 0 {
		points = 1
	}
	e := &env{names: names, vals: make([]complex128, len(names)), c: c}
	valid := 0
	for k := range points {
		for i, name := range names {
			e.vals[i] = pointValue(name, k)
		}
		va, vb := eval(a, e), eval(b, e)
		fa, fb := finite(va), finite(vb)
		switch {
		case !fa && !fb:
			// The same written infinity matches; overflow matches nothing.
			if hasInf(a) && hasInf(b) && closeTo(va, vb, rel, abs) {
				valid++
			}
			continue
		case fa != fb:
			return false
		case !closeTo(va, vb, rel, abs):
			return false
		}
		valid++
	}
	return valid > 0 && c.left >= 0
}

func hasInf(n *node) bool {
	if n.op == opInf {
		return true
	}
	for _, k := range n.kids {
		if hasInf(k) {
			return true
		}
	}
	return false
}

// roundsAlike reports whether two numbers, at least one a decimal literal,
// can be roundings of the same value: a decimal literal stands for the
// numbers within half a unit of its last written place, an exact number
// for itself, and the two ranges must overlap. So 0.33333 matches 1/3 but
// 3159.1 matches neither 3159 nor 3159.0, which the relative tolerance alone
// lets through for large numbers. Answers other than a (signed) number
// literal are judged by the relative tolerance alone.
func roundsAlike(a, b *node, ra, rb *big.Rat) bool {
	pa, okA := lastPlace(a)
	pb, okB := lastPlace(b)
	if !okA || !okB {
		return true
	}
	d := new(big.Rat).Sub(ra, rb)
	d.Abs(d).Mul(d, big.NewRat(2, 1))
	return d.Cmp(new(big.Rat).Add(pa, pb)) < 0
}

// lastPlace returns the unit in the last place of a number literal, 0 for an
// exact one (integer or fraction of integers), and false for anything else.
func lastPlace(n *node) (*big.Rat, bool) {
	for n.op == opNeg {
		n = n.kids[0]
	}
	switch {
	case n.op == opNum && n.place != nil:
		return n.place, true
	case n.op == opNum && !n.dec:
		return new(big.Rat), true
	case n.op == opDiv && !n.dec && n.kids[0].op == opNum && n.kids[1].op == opNum:
		return new(big.Rat), true
	}
	return nil, false
}
