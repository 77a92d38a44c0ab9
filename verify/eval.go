package verify

import (
	"hash/fnv"
	"math"
	"math/big"
	"math/cmplx"
	"sort"
)

// Bounds on exact arithmetic; beyond them evaluation falls back to floating
// point, where huge values overflow to infinity and compare as not equal.
const (
	maxRatBits  = 1 << 14 // numerator or denominator size
	maxFactExct = 300     // largest n! computed exactly
	maxBinomN   = 5000    // largest n in an exact binomial coefficient
	maxRootIdx  = 16      // largest root index tried exactly
)

// exact evaluates a variable-free tree made of rational operations to an
// exact rational. ok is false when the tree holds variables, irrational
// values, or values too large to compute.
func exact(n *node, c *checker) (r *big.Rat, ok bool) {
	if !c.spend(1) {
		return nil, false
	}
	switch n.op {
	case opNum:
		return n.num, true
	case opNeg:
		a, ok := exact(n.kids[0], c)
		if !ok {
			return nil, false
		}
		return new(big.Rat).Neg(a), true
	case opPct:
		a, ok := exact(n.kids[0], c)
		if !ok {
			return nil, false
		}
		return new(big.Rat).Quo(a, big.NewRat(100, 1)), true
	case opAdd, opSub, opMul, opDiv:
		a, b, ok := exactPair(n, c)
		if !ok {
			return nil, false
		}
		if !c.spend((a.Num().BitLen() + a.Denom().BitLen() + b.Num().BitLen() + b.Denom().BitLen()) / 64) {
			return nil, false
		}
		r := new(big.Rat)
		switch n.op {
		case opAdd:
			r.Add(a, b)
		case opSub:
			r.Sub(a, b)
		case opMul:
			r.Mul(a, b)
		case opDiv:
			if b.Sign() == 0 {
				return nil, false
			}
			r.Quo(a, b)
		}
		return r, small(r)
	case opPow:
		a, b, ok := exactPair(n, c)
		if !ok {
			return nil, false
		}
		return ratPow(a, b)
	case opRoot:
		k, ok := exact(n.kids[0], c)
		if !ok || !k.IsInt() || !k.Num().IsInt64() {
			return nil, false
		}
		a, ok := exact(n.kids[1], c)
		if !ok {
			return nil, false
		}
		return ratRoot(a, k.Num().Int64())
	case opFact:
		a, ok := exact(n.kids[0], c)
		if !ok || !a.IsInt() || a.Sign() < 0 || a.Num().Cmp(big.NewInt(maxFactExct)) > 0 {
			return nil, false
		}
		f := new(big.Int).MulRange(1, a.Num().Int64())
		return new(big.Rat).SetInt(f), true
	case opBinom:
		a, b, ok := exactPair(n, c)
		if !ok || !a.IsInt() || !b.IsInt() || a.Sign() < 0 || b.Sign() < 0 ||
			a.Num().Cmp(big.NewInt(maxBinomN)) > 0 || a.Cmp(b) < 0 {
			return nil, false
		}
		c := new(big.Int).Binomial(a.Num().Int64(), b.Num().Int64())
		return new(big.Rat).SetInt(c), true
	case opFunc:
		a, ok := exact(n.kids[0], c)
		if !ok {
			return nil, false
		}
		switch n.name {
		case "abs":
			return new(big.Rat).Abs(a), true
		case "floor", "ceil":
			q, m := new(big.Int).DivMod(a.Num(), a.Denom(), new(big.Int))
			if n.name == "ceil" && m.Sign() != 0 {
				q.Add(q, big.NewInt(1))
			}
			return new(big.Rat).SetInt(q), true
		}
	}
	return nil, false
}

// exactPair evaluates the two children of a binary node exactly.
func exactPair(n *node, c *checker) (a, b *big.Rat, ok bool) {
	if a, ok = exact(n.kids[0], c); !ok {
		return nil, nil, false
	}
	if b, ok = exact(n.kids[1], c); !ok {
		return nil, nil, false
	}
	return a, b, true
}

func small(r *big.Rat) bool {
	return r.Num().BitLen() <= maxRatBits && r.Denom().BitLen() <= maxRatBits
}

// ratPow computes a^b for an integer b, or for b = p/q when a is a perfect
// q-th power.
func ratPow(a, b *big.Rat) (*big.Rat, bool) {
	if !b.IsInt() {
		q := b.Denom()
		if !q.IsInt64() || q.Int64() > maxRootIdx {
			return nil, false
		}
		root, ok := ratRoot(a, q.Int64())
		if !ok {
			return nil, false
		}
		return ratPow(root, new(big.Rat).SetInt(b.Num()))
	}
	if !b.Num().IsInt64() {
		return nil, false
	}
	e := b.Num().Int64()
	if a.Sign() == 0 {
		if e < 0 {
			return nil, false
		}
		if e == 0 {
			return big.NewRat(1, 1), true
		}
		return new(big.Rat), true
	}
	ae := e
	if ae < 0 {
		ae = -ae
	}
	bits := int64(max(a.Num().BitLen(), a.Denom().BitLen()))
	if ae > maxRatBits || bits > 1 && bits*ae > maxRatBits {
		return nil, false
	}
	num := new(big.Int).Exp(a.Num(), big.NewInt(ae), nil)
	den := new(big.Int).Exp(a.Denom(), big.NewInt(ae), nil)
	if e < 0 {
		num, den = den, num
	}
	return new(big.Rat).SetFrac(num, den), true
}

// ratRoot returns the real k-th root of a when it is rational.
func ratRoot(a *big.Rat, k int64) (*big.Rat, bool) {
	if k < 1 || k > maxRootIdx {
		return nil, false
	}
	neg := a.Sign() < 0
	if neg && k%2 == 0 {
		return nil, false
	}
	num, ok1 := intRoot(new(big.Int).Abs(a.Num()), k)
	den, ok2 := intRoot(a.Denom(), k)
	if !ok1 || !ok2 {
		return nil, false
	}
	r := new(big.Rat).SetFrac(num, den)
	if neg {
		r.Neg(r)
	}
	return r, true
}

// intRoot returns the exact k-th root of x ≥ 0, if there is one.
func intRoot(x *big.Int, k int64) (*big.Int, bool) {
	if k == 1 {
		return x, true
	}
	if k == 2 {
		r := new(big.Int).Sqrt(x)
		return r, new(big.Int).Mul(r, r).Cmp(x) == 0
	}
	f, _ := new(big.Float).SetInt(x).Float64()
	guess := int64(math.Round(math.Pow(f, 1/float64(k))))
	if math.IsInf(f, 0) || guess < 0 {
		return nil, false
	}
	for d := int64(-1); d <= 1; d++ {
		r := big.NewInt(guess + d)
		if r.Sign() >= 0 && new(big.Int).Exp(r, big.NewInt(k), nil).Cmp(x) == 0 {
			return r, true
		}
	}
	return nil, false
}

// env assigns values to the free variables of an expression at one point.
type env struct {
	names []string
	vals  []complex128
	c     *checker
}

func (e *env) lookup(name string) complex128 {
	for i, n := range e.names {
		if n == name {
			return e.vals[i]
		}
	}
	return cmplx.NaN()
}

// pointValue is the deterministic value of variable name at sample point k:
// a real number in [0.5, 2) derived from a hash of the name, so that the same
// variable gets the same value on both sides of a comparison.
func pointValue(name string, k int) complex128 {
	return complex(0.5+1.5*unitHash(name, uint64(k)), 0)
}

// unitHash maps (name, k) to [0, 1) with FNV-1a and a splitmix64 finalizer.
func unitHash(name string, k uint64) float64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	x := h.Sum64() + (k+1)*0x9E3779B97F4A7C15
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	x ^= x >> 31
	return float64(x>>11) / (1 << 53)
}

// vars appends the free variables of n to set.
func vars(n *node, set map[string]bool) {
	if n.op == opVar {
		set[n.name] = true
	}
	for _, k := range n.kids {
		vars(k, set)
	}
	for _, r := range n.rows {
		for _, c := range r {
			vars(c, set)
		}
	}
}

func sortedVars(nodes ...*node) []string {
	set := map[string]bool{}
	for _, n := range nodes {
		vars(n, set)
	}
	names := make([]string, 0, len(set))
	for k := range set {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// eval evaluates n at the point given by e in complex floating point.
// Structural nodes evaluate to NaN.
func eval(n *node, e *env) complex128 {
	if !e.c.spend(1) {
		return cmplx.NaN()
	}
	switch n.op {
	case opNum:
		f, _ := n.num.Float64()
		return complex(f, 0)
	case opVar:
		return e.lookup(n.name)
	case opPi:
		return complex(math.Pi, 0)
	case opE:
		return complex(math.E, 0)
	case opI:
		return 1i
	case opInf:
		return complex(math.Inf(1), 0)
	case opNeg:
		return -eval(n.kids[0], e)
	case opPct:
		return eval(n.kids[0], e) / 100
	case opAdd:
		return eval(n.kids[0], e) + eval(n.kids[1], e)
	case opSub:
		return eval(n.kids[0], e) - eval(n.kids[1], e)
	case opMul:
		return eval(n.kids[0], e) * eval(n.kids[1], e)
	case opDiv:
		return eval(n.kids[0], e) / eval(n.kids[1], e)
	case opPow:
		return cpow(eval(n.kids[0], e), eval(n.kids[1], e))
	case opRoot:
		k := eval(n.kids[0], e)
		x := eval(n.kids[1], e)
		if k == 2 {
			return cmplx.Sqrt(x)
		}
		if imag(k) == 0 && imag(x) == 0 && real(x) < 0 && math.Mod(real(k), 2) == 1 {
			return complex(-math.Pow(-real(x), 1/real(k)), 0)
		}
		return cmplx.Pow(x, 1/k)
	case opFact:
		x := eval(n.kids[0], e)
		if imag(x) != 0 {
			return cmplx.NaN()
		}
		return complex(math.Gamma(real(x)+1), 0)
	case opBinom:
		a, b := eval(n.kids[0], e), eval(n.kids[1], e)
		if imag(a) != 0 || imag(b) != 0 {
			return cmplx.NaN()
		}
		la, _ := math.Lgamma(real(a) + 1)
		lb, _ := math.Lgamma(real(b) + 1)
		lc, _ := math.Lgamma(real(a) - real(b) + 1)
		return complex(math.Round(math.Exp(la-lb-lc)), 0)
	case opApply:
		// An unknown function: a smooth function chosen by its name.
		x := eval(n.kids[0], e)
		a, b := 0.5+unitHash(n.name, 101), unitHash(n.name, 102)
		return cmplx.Sin(complex(a, 0)*x+complex(b, 0)) + complex(1.5+unitHash(n.name, 103), 0)
	case opFunc:
		return applyFunc(n.name, eval(n.kids[0], e))
	}
	return cmplx.NaN()
}

// cpow raises a to b, keeping real results real for integer exponents.
func cpow(a, b complex128) complex128 {
	if imag(b) == 0 && imag(a) == 0 {
		x, y := real(a), real(b)
		if x >= 0 || y == math.Trunc(y) {
			return complex(math.Pow(x, y), 0)
		}
	}
	if a == 0 {
		if real(b) > 0 {
			return 0
		}
		return cmplx.Inf()
	}
	return cmplx.Pow(a, b)
}

// complexFuncs are the named functions, on the principal branch.
var complexFuncs = map[string]func(complex128) complex128{
	"sin": cmplx.Sin, "cos": cmplx.Cos, "tan": cmplx.Tan,
	"sec":  func(x complex128) complex128 { return 1 / cmplx.Cos(x) },
	"csc":  func(x complex128) complex128 { return 1 / cmplx.Sin(x) },
	"cot":  func(x complex128) complex128 { return cmplx.Cos(x) / cmplx.Sin(x) },
	"asin": cmplx.Asin, "acos": cmplx.Acos, "atan": cmplx.Atan,
	"sinh": cmplx.Sinh, "cosh": cmplx.Cosh, "tanh": cmplx.Tanh,
	"exp": cmplx.Exp, "ln": cmplx.Log, "log": cmplx.Log,
	"abs":   func(x complex128) complex128 { return complex(cmplx.Abs(x), 0) },
	"floor": realOnly(math.Floor),
	"ceil":  realOnly(math.Ceil),
}

// realOnly lifts a real function to complex arguments, undefined off the
// real line.
func realOnly(f func(float64) float64) func(complex128) complex128 {
	return func(x complex128) complex128 {
		if imag(x) != 0 {
			return cmplx.NaN()
		}
		return complex(f(real(x)), 0)
	}
}

func applyFunc(name string, x complex128) complex128 {
	if f, ok := complexFuncs[name]; ok {
		return f(x)
	}
	return cmplx.NaN()
}

func finite(z complex128) bool {
	return !math.IsNaN(real(z)) && !math.IsNaN(imag(z)) && !math.IsInf(real(z), 0) && !math.IsInf(imag(z), 0)
}

// close reports whether a and b agree within relative tolerance rel (and an
// absolute tolerance abs for values near zero). Infinities agree only with
// infinities of the same sign.
func closeTo(a, b complex128, rel, abs float64) bool {
	if a == b {
		return finite(a) || imag(a) == 0 && !math.IsNaN(real(a))
	}
	if !finite(a) || !finite(b) {
		return false
	}
	d := cmplx.Abs(a - b)
	return d <= rel*max(cmplx.Abs(a), cmplx.Abs(b)) || d <= abs
}
