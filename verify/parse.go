package verify

import (
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// op is the kind of an expression-tree node.
type op uint8

const (
	opNum    op = iota // num
	opVar              // name
	opPi               // π
	opE                // Euler's number
	opI                // imaginary unit
	opInf              // ∞
	opNeg              // -kids[0]
	opAdd              // kids[0] + kids[1]
	opSub              // kids[0] - kids[1]
	opMul              // kids[0] · kids[1]
	opDiv              // kids[0] / kids[1]
	opPow              // kids[0] ^ kids[1]
	opFunc             // name(kids[0]); name is an evaluator function name
	opApply            // an unknown function applied: name(kids[0]), as in u(t)
	opRoot             // kids[0]-th root of kids[1]
	opFact             // kids[0]!
	opBinom            // C(kids[0], kids[1])
	opPct              // kids[0] percent
	opPM               // kids[0] ± kids[1]; sign -1 for ∓
	opTuple            // ordered, with brackets open/close: tuples and intervals
	opSet              // unordered: \{...\} or a bare comma list
	opMatrix           // rows of cells
	opEq               // kids[0] = kids[1]
	opRel              // kids[0] name kids[1] for <, >, \le, \ge, \ne
	opUnion            // kids joined by ∪
)

// node is an expression-tree node. dec records that a decimal literal occurs
// in the subtree, which loosens numeric comparison to a relative tolerance.
type node struct {
	op    op
	num   *big.Rat
	name  string
	kids  []*node
	rows  [][]*node
	open  byte
	close byte
	sign  int8
	dec   bool // a decimal literal occurs in the subtree
	frac  bool // written as \frac{a}{b}
	// place is the unit in the last written place of a decimal literal
	// (0.01 for "3.25", 1000 for "1.5e4"); nil for other nodes.
	place *big.Rat
}

func (n *node) String() string {
	var b strings.Builder
	n.format(&b)
	return b.String()
}

func (n *node) format(b *strings.Builder) {
	switch n.op {
	case opNum:
		b.WriteString(n.num.RatString())
	case opVar, opApply, opFunc:
		b.WriteString(n.name)
	case opPi:
		b.WriteString("π")
	case opE:
		b.WriteString("e")
	case opI:
		b.WriteString("i")
	case opInf:
		b.WriteString("∞")
	default:
		fmt.Fprintf(b, "op%d", n.op)
	}
	if n.op == opTuple {
		b.WriteByte(n.open)
	} else if len(n.kids) > 0 || n.rows != nil {
		b.WriteByte('(')
	}
	for i, k := range n.kids {
		if i > 0 {
			b.WriteByte(',')
		}
		k.format(b)
	}
	for _, r := range n.rows {
		b.WriteByte('[')
		for i, k := range r {
			if i > 0 {
				b.WriteByte(',')
			}
			k.format(b)
		}
		b.WriteByte(']')
	}
	if n.op == opTuple {
		b.WriteByte(n.close)
	} else if len(n.kids) > 0 || n.rows != nil {
		b.WriteByte(')')
	}
}

// maxDepth bounds the nesting of the recursive-descent parser.
const maxDepth = 64

var errDepth = errors.New("expression nested too deeply")

// parser is a recursive-descent parser over the token slice of one answer.
type parser struct {
	src   string
	toks  []token
	pos   int
	depth int
}

// parse parses normalized answer text into an expression tree.
func parse(s string) (*node, error) {
	toks, err := lex(s)
	if err != nil {
		return nil, err
	}
	p := &parser{src: s, toks: toks}
	n, err := p.list()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, fmt.Errorf("unexpected %q at offset %d", t.text, t.start)
	}
	return n, nil
}

func (p *parser) peek() token { return p.toks[p.pos] }

func (p *parser) peekAt(k int) token {
	if p.pos+k < len(p.toks) {
		return p.toks[p.pos+k]
	}
	return p.toks[len(p.toks)-1]
}

func (p *parser) next() token {
	t := p.toks[p.pos]
	if t.kind != tEOF {
		p.pos++
	}
	return t
}

func (p *parser) isOp(text string) bool {
	t := p.peek()
	return t.kind == tOp && t.text == text
}

func (p *parser) isCmd(name string) bool {
	t := p.peek()
	return t.kind == tCmd && t.text == name
}

func (p *parser) expectOp(text string) error {
	if !p.isOp(text) {
		t := p.peek()
		return fmt.Errorf("expected %q at offset %d, found %q", text, t.start, t.text)
	}
	p.pos++
	return nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return errDepth
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

// list parses comma- or semicolon-separated items; several items form an
// unordered set (a list of solutions).
func (p *parser) list() (*node, error) {
	first, err := p.relation()
	if err != nil {
		return nil, err
	}
	if !p.isOp(",") && !p.isOp(";") {
		return first, nil
	}
	items := []*node{first}
	for p.isOp(",") || p.isOp(";") {
		p.pos++
		it, err := p.relation()
		if err != nil {
			return nil, err
		}
		items = append(items, it)
	}
	return mk(opSet, items...), nil
}

// relation parses a = b, a \in S, a < b and chains of them; a chain keeps its
// first and last members.
func (p *parser) relation() (*node, error) {
	lhs, err := p.union()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		var rel string
		switch {
		case t.kind == tOp && t.text == "=":
			rel = "="
		case t.kind == tOp && (t.text == "<" || t.text == ">"):
			rel = map[string]string{"<": "lt", ">": "gt"}[t.text]
			if u := p.peekAt(1); u.kind == tOp && u.text == "=" {
				p.pos++
				rel = map[string]string{"<": "le", ">": "ge"}[t.text]
			}
		case t.kind == tCmd && (t.text == "le" || t.text == "ge" || t.text == "lt" || t.text == "gt" || t.text == "ne" || t.text == "in"):
			rel = t.text
		default:
			return lhs, nil
		}
		p.pos++
		rhs, err := p.union()
		if err != nil {
			return nil, err
		}
		switch rel {
		case "=", "in":
			// Keep the first member of a chain: x = 2 + 1 = 3 is x = 3.
			if lhs.op == opEq {
				lhs = mk(opEq, lhs.kids[0], rhs)
			} else {
				lhs = mk(opEq, lhs, rhs)
			}
		default:
			lhs = mk(opRel, lhs, rhs).named(rel)
		}
	}
}

// union parses intervals or sets joined by \cup.
func (p *parser) union() (*node, error) {
	first, err := p.expr()
	if err != nil {
		return nil, err
	}
	if !p.isCmd("cup") {
		return first, nil
	}
	parts := []*node{first}
	for p.isCmd("cup") {
		p.pos++
		n, err := p.expr()
		if err != nil {
			return nil, err
		}
		parts = append(parts, n)
	}
	return mk(opUnion, parts...), nil
}

// expr parses sums and differences, including ± and ∓.
func (p *parser) expr() (*node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	lhs, err := p.term()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		switch {
		case t.kind == tOp && (t.text == "+" || t.text == "-"):
			p.pos++
			rhs, err := p.term()
			if err != nil {
				return nil, err
			}
			if t.text == "+" {
				lhs = mk(opAdd, lhs, rhs)
			} else {
				lhs = mk(opSub, lhs, rhs)
			}
		case t.kind == tCmd && (t.text == "pm" || t.text == "mp"):
			p.pos++
			rhs, err := p.term()
			if err != nil {
				return nil, err
			}
			lhs = pm(lhs, rhs, t.text)
		default:
			return lhs, nil
		}
	}
}

func pm(a, b *node, name string) *node {
	n := mk(opPM, a, b)
	n.sign = 1
	if name == "mp" {
		n.sign = -1
	}
	return n
}

// term parses products and quotients, with implicit multiplication ("2x",
// "3\pi", "(x+1)(x-1)") at the same precedence, and mixed numbers
// ("3\frac{1}{2}" is 7/2).
func (p *parser) term() (*node, error) {
	lhs, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		switch {
		case t.kind == tOp && (t.text == "*" || t.text == "/"):
			p.pos++
			rhs, err := p.unary()
			if err != nil {
				return nil, err
			}
			if t.text == "*" {
				lhs = mk(opMul, lhs, rhs)
			} else {
				lhs = mk(opDiv, lhs, rhs)
			}
		case p.startsAtom():
			rhs, err := p.power()
			if err != nil {
				return nil, err
			}
			if mixed := mixedNumber(lhs, rhs); mixed != nil {
				lhs = mixed
			} else {
				lhs = mk(opMul, lhs, rhs)
			}
		default:
			return lhs, nil
		}
	}
}

// mixedNumber returns whole + frac when lhs is an integer literal (possibly
// negated) and rhs a \frac of integer literals, or nil.
func mixedNumber(lhs, rhs *node) *node {
	if rhs.op != opDiv || !rhs.frac || rhs.kids[0].op != opNum || rhs.kids[1].op != opNum ||
		!rhs.kids[0].num.IsInt() || !rhs.kids[1].num.IsInt() || rhs.kids[0].dec || rhs.kids[1].dec {
		return nil
	}
	whole, neg := lhs, false
	if whole.op == opNeg {
		whole, neg = whole.kids[0], true
	}
	if whole.op != opNum || !whole.num.IsInt() || whole.dec || whole.num.Sign() < 0 {
		return nil
	}
	sum := mk(opAdd, whole, rhs)
	if neg {
		return mk(opNeg, sum)
	}
	return sum
}

// startsAtom reports whether the next token can begin an implicitly
// multiplied factor.
func (p *parser) startsAtom() bool {
	t := p.peek()
	switch t.kind {
	case tNum, tIdent, tFunc:
		return true
	case tCmd:
		switch t.text {
		case "frac", "sqrt", "binom", "pi", "infty", "lfloor", "lceil", "langle", "begin",
			"dot", "ddot", "hat", "bar", "vec", "tilde", "text", "operatorname":
			return true
		}
	case tOp:
		return t.text == "(" || t.text == "[" || t.text == "{" || t.text == `\{`
	}
	return false
}

// unary parses leading signs.
func (p *parser) unary() (*node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	t := p.peek()
	switch {
	case t.kind == tOp && t.text == "-":
		p.pos++
		n, err := p.unary()
		if err != nil {
			return nil, err
		}
		return mk(opNeg, n), nil
	case t.kind == tOp && t.text == "+":
		p.pos++
		return p.unary()
	case t.kind == tCmd && (t.text == "pm" || t.text == "mp"):
		p.pos++
		n, err := p.unary()
		if err != nil {
			return nil, err
		}
		return pm(mk(opNum).withInt(0), n, t.text), nil
	}
	return p.power()
}

// power parses a postfix atom followed by exponents, right-associatively in
// the sense of LaTeX groups: 2^{3^{2}} is 2^9.
func (p *parser) power() (*node, error) {
	base, err := p.postfix()
	if err != nil {
		return nil, err
	}
	for p.isOp("^") {
		p.pos++
		exp, err := p.exponent()
		if err != nil {
			return nil, err
		}
		base = mk(opPow, base, exp)
		if base, err = p.postfixOps(base); err != nil {
			return nil, err
		}
	}
	return base, nil
}

// exponent parses what follows ^: a group, a signed atom, or a number.
func (p *parser) exponent() (*node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	if p.isOp("-") {
		p.pos++
		n, err := p.exponent()
		if err != nil {
			return nil, err
		}
		return mk(opNeg, n), nil
	}
	if p.isOp("+") {
		p.pos++
	}
	return p.postfix()
}

// postfix parses an atom followed by !, % and primes.
func (p *parser) postfix() (*node, error) {
	n, err := p.atom()
	if err != nil {
		return nil, err
	}
	return p.postfixOps(n)
}

func (p *parser) postfixOps(n *node) (*node, error) {
	for {
		switch {
		case p.isOp("!"):
			p.pos++
			n = mk(opFact, n)
		case p.isOp("%"):
			p.pos++
			n = mk(opPct, n)
		case p.isOp("'"):
			p.pos++
			if n.op != opVar {
				return nil, fmt.Errorf("prime after a non-variable at offset %d", p.peek().start)
			}
			n = &node{op: opVar, name: n.name + "'"}
		default:
			return n, nil
		}
	}
}

// atom parses a number, a symbol, a bracketed group, or a command with its
// arguments.
func (p *parser) atom() (*node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	t := p.next()
	switch t.kind {
	case tNum:
		return numberNode(t.text)
	case tIdent:
		return p.symbol(t.text)
	case tFunc:
		return p.function(t.text)
	case tCmd:
		return p.command(t)
	case tOp:
		switch t.text {
		case "(", "[":
			return p.bracketed(t.text[0])
		case "{":
			return p.braced("}", false)
		case `\{`:
			return p.braced(`\}`, true)
		case "|":
			inner, err := p.expr()
			if err != nil {
				return nil, err
			}
			if err := p.expectOp("|"); err != nil {
				return nil, err
			}
			return mk(opFunc, inner).named("abs"), nil
		}
	}
	return nil, fmt.Errorf("unexpected %q at offset %d", t.text, t.start)
}

func (n *node) named(name string) *node { n.name = name; return n }

// symbol parses a variable with its subscripts and primes. The letters e and
// i are Euler's number and the imaginary unit. A symbol followed by a
// parenthesized single symbol or number is a function application, so u(t)
// and I(0) stay distinct from u·t and I·0.
func (p *parser) symbol(name string) (*node, error) {
	for p.isOp("_") {
		p.pos++
		sub, err := p.rawArg()
		if err != nil {
			return nil, err
		}
		name += "_" + sub
	}
	if name == "e" {
		return &node{op: opE}, nil
	}
	if name == "i" {
		return &node{op: opI}, nil
	}
	return p.maybeApply(&node{op: opVar, name: name})
}

func (p *parser) maybeApply(v *node) (*node, error) {
	for p.isOp("'") {
		p.pos++
		v.name += "'"
	}
	if p.isOp("(") && (p.peekAt(1).kind == tIdent || p.peekAt(1).kind == tNum) &&
		p.peekAt(2).kind == tOp && p.peekAt(2).text == ")" {
		p.pos++
		arg, err := p.atom()
		if err != nil {
			return nil, err
		}
		p.pos++ // ")"
		return mk(opApply, arg).named(v.name), nil
	}
	return v, nil
}

// rawArg reads a subscript: one token or a braced group, returned as text
// without spaces.
func (p *parser) rawArg() (string, error) {
	t := p.next()
	switch {
	case t.kind == tOp && t.text == "{":
		depth, start := 1, t.end
		for {
			u := p.next()
			switch {
			case u.kind == tEOF:
				return "", fmt.Errorf("unclosed subscript at offset %d", t.start)
			case u.kind == tOp && u.text == "{":
				depth++
			case u.kind == tOp && u.text == "}":
				depth--
				if depth == 0 {
					return strings.ReplaceAll(p.src[start:u.start], " ", ""), nil
				}
			}
		}
	case t.kind == tNum:
		// x_12 is x_1 2 in LaTeX; keep the first digit as the subscript.
		if len(t.text) > 1 {
			p.pos--
			p.toks[p.pos].text = t.text[1:]
			p.toks[p.pos].start++
			return t.text[:1], nil
		}
		return t.text, nil
	case t.kind == tEOF:
		return "", fmt.Errorf("missing subscript at offset %d", t.start)
	}
	return t.text, nil
}

// function parses a named function with optional power (\sin^2 x), inverse
// (\sin^{-1} x) or base (\log_2 x), and its argument: a bracketed group, or
// the implicitly multiplied factors that follow (\sin 2x).
func (p *parser) function(name string) (*node, error) {
	var pow, base *node
	var err error
	if name == "log" && p.isOp("_") {
		p.pos++
		if base, err = p.arg(); err != nil {
			return nil, err
		}
	}
	if p.isOp("^") {
		p.pos++
		if pow, err = p.exponent(); err != nil {
			return nil, err
		}
		if pow.op == opNeg && pow.kids[0].op == opNum && pow.kids[0].num.Cmp(big.NewRat(1, 1)) == 0 {
			if inv, ok := map[string]string{"sin": "asin", "cos": "acos", "tan": "atan"}[name]; ok {
				name, pow = inv, nil
			}
		}
	}
	var argument *node
	if p.isOp("(") || p.isOp("{") || p.isOp("[") {
		if argument, err = p.atom(); err != nil {
			return nil, err
		}
	} else {
		if argument, err = p.power(); err != nil {
			return nil, err
		}
		for p.startsAtom() && p.peek().kind != tFunc {
			f, err := p.power()
			if err != nil {
				return nil, err
			}
			argument = mk(opMul, argument, f)
		}
	}
	var n *node
	switch name {
	case "sqrt":
		n = mk(opRoot, mk(opNum).withInt(2), argument)
	case "log10":
		n = mk(opDiv, mk(opFunc, argument).named("ln"), mk(opFunc, mk(opNum).withInt(10)).named("ln"))
	default:
		n = mk(opFunc, argument).named(name)
	}
	if base != nil {
		n = mk(opDiv, n.named("ln"), mk(opFunc, base).named("ln"))
	}
	if pow != nil {
		n = mk(opPow, n, pow)
	}
	return n, nil
}

// arg parses one LaTeX macro argument: a braced group, a single digit of a
// number (\frac12), or a single atom (\sqrt x, \frac\pi2).
func (p *parser) arg() (*node, error) {
	t := p.peek()
	switch {
	case t.kind == tOp && t.text == "{":
		p.pos++
		return p.braced("}", false)
	case t.kind == tNum && len(t.text) > 1 && strings.Trim(t.text, "0123456789") == "":
		p.toks[p.pos].text = t.text[1:]
		p.toks[p.pos].start++
		return numberNode(t.text[:1])
	}
	return p.atom()
}

// command parses a structural command and its arguments.
func (p *parser) command(t token) (*node, error) {
	switch t.text {
	case "pi":
		return &node{op: opPi}, nil
	case "infty":
		return &node{op: opInf}, nil
	case "frac", "binom":
		a, err := p.arg()
		if err != nil {
			return nil, err
		}
		b, err := p.arg()
		if err != nil {
			return nil, err
		}
		if t.text == "binom" {
			return mk(opBinom, a, b), nil
		}
		n := mk(opDiv, a, b)
		n.frac = true
		return n, nil
	case "sqrt":
		index := mk(opNum).withInt(2)
		if p.isOp("[") {
			p.pos++
			var err error
			if index, err = p.expr(); err != nil {
				return nil, err
			}
			if err := p.expectOp("]"); err != nil {
				return nil, err
			}
		}
		if p.isOp("(") {
			radicand, err := p.atom()
			if err != nil {
				return nil, err
			}
			return mk(opRoot, index, radicand), nil
		}
		radicand, err := p.arg()
		if err != nil {
			return nil, err
		}
		return mk(opRoot, index, radicand), nil
	case "lfloor", "lceil":
		inner, err := p.expr()
		if err != nil {
			return nil, err
		}
		closer := map[string]string{"lfloor": "rfloor", "lceil": "rceil"}[t.text]
		if !p.isCmd(closer) {
			return nil, fmt.Errorf("expected \\%s at offset %d", closer, p.peek().start)
		}
		p.pos++
		return mk(opFunc, inner).named(map[string]string{"lfloor": "floor", "lceil": "ceil"}[t.text]), nil
	case "langle":
		items, err := p.items(func() bool { return p.isCmd("rangle") })
		if err != nil {
			return nil, err
		}
		n := mk(opTuple, items...)
		n.open, n.close = '<', '>'
		return n, nil
	case "dot", "ddot", "hat", "bar", "vec", "tilde":
		inner, err := p.arg()
		if err != nil {
			return nil, err
		}
		if inner.op != opVar && inner.op != opE && inner.op != opI {
			return nil, fmt.Errorf("\\%s over a non-symbol at offset %d", t.text, t.start)
		}
		return p.symbol(t.text + "{" + inner.String() + "}")
	case "text", "operatorname":
		return p.arg()
	case "begin":
		return p.environment()
	}
	return nil, fmt.Errorf("unexpected \\%s at offset %d", t.text, t.start)
}

// bracketed parses ( ... ) or [ ... ], closed by ) or ]. One item is a
// grouping; several form a tuple or an interval whose brackets are kept.
func (p *parser) bracketed(open byte) (*node, error) {
	items, err := p.items(func() bool { return p.isOp(")") || p.isOp("]") })
	if err != nil {
		return nil, err
	}
	closer := p.toks[p.pos-1].text[0]
	if len(items) == 1 && (open == '(' && closer == ')' || open == '[' && closer == ']') {
		return items[0], nil
	}
	if len(items) == 1 {
		return nil, fmt.Errorf("mismatched brackets %c%c", open, closer)
	}
	n := mk(opTuple, items...)
	n.open, n.close = open, closer
	return n, nil
}

// braced parses { ... } (a grouping, or a set when it holds several items)
// or \{ ... \} (always a set).
func (p *parser) braced(closer string, set bool) (*node, error) {
	items, err := p.items(func() bool { return p.isOp(closer) })
	if err != nil {
		return nil, err
	}
	if len(items) == 1 && !set {
		return items[0], nil
	}
	return mk(opSet, items...), nil
}

// items parses comma-separated relations up to and including the closing
// token recognized by done.
func (p *parser) items(done func() bool) ([]*node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	var items []*node
	if done() {
		p.pos++
		return items, nil
	}
	for {
		it, err := p.relation()
		if err != nil {
			return nil, err
		}
		items = append(items, it)
		switch {
		case p.isOp(",") || p.isOp(";"):
			p.pos++
		case done():
			p.pos++
			return items, nil
		default:
			t := p.peek()
			return nil, fmt.Errorf("unexpected %q at offset %d", t.text, t.start)
		}
	}
}

// environment parses \begin{pmatrix} a & b \\ c & d \end{pmatrix} and the
// other matrix environments into a matrix node.
func (p *parser) environment() (*node, error) {
	env, err := p.rawArg()
	if err != nil {
		return nil, err
	}
	switch env {
	case "pmatrix", "bmatrix", "Bmatrix", "vmatrix", "Vmatrix", "matrix", "smallmatrix":
	case "array":
		if _, err := p.rawArg(); err != nil { // column specification
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unsupported environment %q", env)
	}
	var rows [][]*node
	var row []*node
	for {
		cell, err := p.expr()
		if err != nil {
			return nil, err
		}
		row = append(row, cell)
		t := p.next()
		switch {
		case t.kind == tOp && t.text == "&":
		case t.kind == tRowSep:
			rows = append(rows, row)
			row = nil
			if p.isCmd("end") {
				p.pos++
				return p.endEnvironment(env, rows)
			}
		case t.kind == tCmd && t.text == "end":
			return p.endEnvironment(env, append(rows, row))
		default:
			return nil, fmt.Errorf("unexpected %q in %s at offset %d", t.text, env, t.start)
		}
	}
}

func (p *parser) endEnvironment(env string, rows [][]*node) (*node, error) {
	name, err := p.rawArg()
	if err != nil {
		return nil, err
	}
	if name != env {
		return nil, fmt.Errorf("\\begin{%s} closed by \\end{%s}", env, name)
	}
	for _, r := range rows {
		if len(r) != len(rows[0]) {
			return nil, fmt.Errorf("ragged %s", env)
		}
	}
	return &node{op: opMatrix, rows: rows, dec: anyDec(rows)}, nil
}

func anyDec(rows [][]*node) bool {
	for _, r := range rows {
		for _, c := range r {
			if c.dec {
				return true
			}
		}
	}
	return false
}

// mk builds a node, propagating the decimal flag from its children.
func mk(o op, kids ...*node) *node {
	n := &node{op: o, kids: kids}
	for _, k := range kids {
		n.dec = n.dec || k.dec
	}
	return n
}

func (n *node) withInt(v int64) *node {
	n.num = big.NewRat(v, 1)
	return n
}

// maxExp10 bounds the decimal exponent of a literal evaluated exactly.
const maxExp10 = 400

// numberNode parses a decimal literal such as 12, 0.50, 1. or 4.5e-33 into
// an exact rational. Literals with a fraction part or an exponent are marked
// decimal.
func numberNode(lit string) (*node, error) {
	mant, exp := lit, 0
	if k := strings.IndexAny(lit, "eE"); k >= 0 {
		mant = lit[:k]
		e, neg := 0, false
		rest := lit[k+1:]
		if rest != "" && (rest[0] == '+' || rest[0] == '-') {
			neg = rest[0] == '-'
			rest = rest[1:]
		}
		for i := 0; i < len(rest); i++ {
			e = e*10 + int(rest[i]-'0')
			if e > maxExp10 {
				return nil, fmt.Errorf("exponent of %q out of range", lit)
			}
		}
		if neg {
			e = -e
		}
		exp = e
	}
	intPart, frac, hasDot := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		digits = "0"
	}
	num, ok := new(big.Int).SetString(digits, 10)
	if !ok {
		return nil, fmt.Errorf("bad number %q", lit)
	}
	exp -= len(frac)
	r := new(big.Rat).SetInt(num)
	if exp != 0 {
		pow := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(exp))), nil)
		if exp > 0 {
			r.Mul(r, new(big.Rat).SetInt(pow))
		} else {
			r.Quo(r, new(big.Rat).SetInt(pow))
		}
	}
	n := &node{op: opNum, num: r, dec: hasDot || mant != lit}
	if n.dec {
		n.place = new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(exp))), nil))
		if exp < 0 {
			n.place.Inv(n.place)
		}
	}
	return n, nil
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
