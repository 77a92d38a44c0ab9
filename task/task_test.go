package task

import (
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// configs covers each task at its defaults and at harder settings.
var configs = []struct {
	name string
	opts Options
}{
	{"arith", Options{}},
	{"arith", Options{Digits: 1, Operators: "+"}},
	{"arith", Options{Digits: 4, Ops: 3}},
	{"arith", Options{Digits: 3, MulDigits: 3, Operators: "*"}},
	{"arith", Options{Digits: 2, Ops: 4, Operators: "-+"}},
	{"countdown", Options{}},
	{"countdown", Options{Numbers: 3, MaxNumber: 10}},
	{"countdown", Options{Numbers: 6, MaxNumber: 100, MaxTarget: 5000}},
	{"countdown", Options{Numbers: 5, Fractions: true}},
}

func mustNew(t testing.TB, name string, opts Options) Task {
	t.Helper()
	tk, err := New(name, opts)
	if err != nil {
		t.Fatalf("New(%q, %+v): %v", name, opts, err)
	}
	return tk
}

func TestNewRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string // a fragment of the error
	}{
		{"nope", Options{}, `unknown task "nope"`},
		{"arith", Options{Digits: 13}, "digits must be in 1..12, got 13"},
		{"arith", Options{Digits: -1}, "digits must be in 1..12, got -1"},
		{"arith", Options{Ops: 5}, "ops must be in 1..4, got 5"},
		{"arith", Options{MulDigits: 4}, "mul_digits must be in 1..3, got 4"},
		{"arith", Options{Operators: "+/"}, `operators must be a non-empty subset of "+-*" without repeats, got "+/"`},
		{"arith", Options{Operators: "++"}, `got "++"`},
		{"arith", Options{FormatWeight: 1}, "format_weight must be in [0, 1), got 1"},
		{"countdown", Options{FormatWeight: -0.1}, "got -0.1"},
		{"countdown", Options{Numbers: 2}, "numbers must be in 3..6, got 2"},
		{"countdown", Options{Numbers: 7}, "got 7"},
		{"countdown", Options{MaxNumber: 1}, "max_number must be in 2..1000, got 1"},
		{"countdown", Options{MaxTarget: 2000000}, "max_target must be in 10..1000000, got 2000000"},
	}
	for _, tt := range tests {
		_, err := New(tt.name, tt.opts)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%q, %+v) error = %v, want it to mention %q", tt.name, tt.opts, err, tt.want)
		}
	}
	for _, name := range Names() {
		if _, err := New(name, Options{}); err != nil {
			t.Errorf("New(%q, defaults): %v", name, err)
		}
	}
}

func TestDeterministicBySeed(t *testing.T) {
	for _, c := range configs {
		a := mustNew(t, c.name, c.opts)
		b := mustNew(t, c.name, c.opts)
		other := c.opts
		other.Seed = c.opts.Seed + 1
		o := mustNew(t, c.name, other)
		differ := 0
		for _, split := range []Split{Train, Test} {
			for i := range 50 {
				p, q := a.Problem(split, i), b.Problem(split, i)
				if p != q {
					t.Fatalf("%s %+v: problem %s/%d differs between equal tasks: %+v vs %+v", c.name, c.opts, split, i, p, q)
				}
				if want := fmt.Sprintf("%s/%s/%d", c.name, split, i); p.ID != want {
					t.Errorf("ID = %q, want %q", p.ID, want)
				}
				if o.Problem(split, i).Question != p.Question {
					differ++
				}
			}
		}
		if differ < 50 {
			t.Errorf("%s %+v: only %d of 100 problems change with the seed", c.name, c.opts, differ)
		}
		if _, finite := Len(a, Train); finite {
			t.Errorf("%s: generated task reports a finite length", c.name)
		}
	}
}

// canonicalOf is the split-deciding form of a generated problem.
func canonicalOf(t *testing.T, name string, p Problem) string {
	if name != "countdown" {
		return p.Question
	}
	target, numbers, err := ParseCountdown(p.Question)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(numbers)
	return fmt.Sprint(numbers, target)
}

func TestSplitsAreDisjoint(t *testing.T) {
	const nTrain, nTest = 5000, 500
	for _, c := range configs {
		tk := mustNew(t, c.name, c.opts)
		train := map[string]bool{}
		for i := range nTrain {
			p := tk.Problem(Train, i)
			cf := canonicalOf(t, c.name, p)
			if splitOf(c.name, cf) != Train {
				t.Fatalf("%s: train problem %q hashes to the test split", c.name, p.Question)
			}
			train[cf] = true
		}
		// A different seed must not leak test problems either.
		opts := c.opts
		opts.Seed = 99
		other := mustNew(t, c.name, opts)
		for _, tk := range []Task{tk, other} {
			for i := range nTest {
				p := tk.Problem(Test, i)
				if cf := canonicalOf(t, c.name, p); train[cf] {
					t.Fatalf("%s %+v: test problem %d %q is also among the first %d train problems", c.name, c.opts, i, p.Question, nTrain)
				}
			}
		}
	}
}

func TestTestShareIsAboutOneTenth(t *testing.T) {
	test := 0
	const n = 20000
	for i := range n {
		if splitOf("arith", strconv.Itoa(i)) == Test {
			test++
		}
	}
	if test < n/10-300 || test > n/10+300 {
		t.Errorf("%d of %d canonical forms in test, want about %d", test, n, n/10)
	}
}

func TestSolutionsEarnFullReward(t *testing.T) {
	for _, c := range configs {
		tk := mustNew(t, c.name, c.opts)
		for _, split := range []Split{Train, Test} {
			for i := range 300 {
				p := tk.Problem(split, i)
				if r := tk.Reward(p, p.Solution); r != 1 {
					t.Fatalf("%s %+v: Reward(solution) = %v for %+v", c.name, c.opts, r, p)
				}
				if got, ok := FinalAnswer(p.Solution); !ok || got != p.Answer {
					t.Fatalf("%s: solution's final answer %q, want %q", c.name, got, p.Answer)
				}
				if !strings.HasSuffix(p.Solution, AnswerMarker+" "+p.Answer) {
					t.Fatalf("%s: solution does not end in its answer line: %q", c.name, p.Solution)
				}
			}
		}
	}
}

func TestDefaultSolutionsAreShort(t *testing.T) {
	for name, limit := range map[string]int{"arith": 40, "countdown": 64} {
		tk := mustNew(t, name, Options{})
		for i := range 2000 {
			if p := tk.Problem(Train, i); len(p.Solution) > limit {
				t.Errorf("%s: solution of %d chars > %d: %q", name, len(p.Solution), limit, p.Solution)
			}
		}
	}
}

// workLineRE matches an arith work line: head "a op b", columns, result.
var workLineRE = regexp.MustCompile(`^(\d+)([-+*])(\d+):([^=;]+=\d+)(;[^=;]+=\d+)*;=(\d+)$`)

func TestArithWorkIsCorrect(t *testing.T) {
	for _, c := range configs {
		if c.name != "arith" {
			continue
		}
		tk := mustNew(t, c.name, c.opts)
		for i := range 300 {
			p := tk.Problem(Train, i)
			// The answer is the question's value, computed independently.
			nums := regexp.MustCompile(`\d+`).FindAllString(p.Question, -1)
			ints := make([]int, len(nums))
			for j, s := range nums {
				ints[j], _ = strconv.Atoi(s)
			}
			v, err := EvalExpression(p.Question, ints, false)
			if err != nil || v.RatString() != p.Answer {
				t.Fatalf("%q: answer %q, evaluator says %v (%v)", p.Question, p.Answer, v, err)
			}
			lines := strings.Split(p.Solution, "\n")
			for _, line := range lines[:len(lines)-1] {
				m := workLineRE.FindStringSubmatch(line)
				if m == nil {
					t.Fatalf("%q: malformed work line %q", p.Question, line)
				}
				x, _ := new(big.Int).SetString(m[1], 10)
				y, _ := new(big.Int).SetString(m[3], 10)
				switch m[2] {
				case "+":
					x.Add(x, y)
				case "-":
					x.Sub(x, y)
				case "*":
					x.Mul(x, y)
				}
				if x.String() != m[6] {
					t.Fatalf("%q: line %q computes %s", p.Question, line, x)
				}
				if x.Sign() < 0 {
					t.Fatalf("%q: negative intermediate in %q", p.Question, line)
				}
			}
		}
	}
}

func TestArithGoldenSolutions(t *testing.T) {
	tests := []struct {
		nums []string
		ops  string
		want string
	}{
		{[]string{"47", "38"}, "+", "47+38:7+8=15;4+3+1=8;=85\n#### 85"},
		{[]string{"52", "38"}, "-", "52-38:12-8=4;5-1-3=1;=14\n#### 14"},
		{[]string{"503", "78"}, "-", "503-78:13-8=5;10-1-7=2;5-1-0=4;=425\n#### 425"},
		{[]string{"47", "8"}, "*", "47*8:7*8=56;4*8+5=37;=376\n#### 376"},
		{[]string{"5", "5"}, "-", "5-5:5-5=0;=0\n#### 0"},
		{[]string{"12", "47", "3"}, "+*", "47*3:7*3=21;4*3+2=14;=141\n12+141:2+1=3;1+4=5;0+1=1;=153\n#### 153"},
		{[]string{"99", "96"}, "*", "99*6:9*6=54;9*6+5=59;=594\n99*9:9*9=81;9*9+8=89;=891\n594+8910:4+0=4;9+1=10;5+9+1=15;0+8+1=9;=9504\n#### 9504"},
	}
	for _, tt := range tests {
		p, ok := arithSolve(tt.nums, []byte(tt.ops))
		if !ok || p.Solution != tt.want {
			t.Errorf("arithSolve(%v, %q) = %q, %v; want %q", tt.nums, tt.ops, p.Solution, ok, tt.want)
		}
	}
	if _, ok := arithSolve([]string{"3", "5"}, []byte("-")); ok {
		t.Error("arithSolve(3-5) accepted a negative result")
	}
}

func TestRewardOfWrongAndMalformedAnswers(t *testing.T) {
	arith := mustNew(t, "arith", Options{})
	arithFmt := mustNew(t, "arith", Options{FormatWeight: 0.1})
	p := Problem{Question: "47+38", Answer: "85"}
	tests := []struct {
		response      string
		want, wantFmt float64
	}{
		{"#### 85", 1, 1},
		{"7+8=15\n####  085 \n", 1, 1},
		{"#### 84", 0, 0.1},
		{"#### -85", 0, 0.1},
		{"#### 85.0", 0, 0},
		{"#### eighty-five", 0, 0},
		{"85", 0, 0},
		{"", 0, 0},
		{"#### 85\n#### 86", 0, 0.1}, // the last answer line counts
		{"#### 86\n#### 85", 1, 1},
	}
	for _, tt := range tests {
		if got := arith.Reward(p, tt.response); got != tt.want {
			t.Errorf("arith Reward(%q) = %v, want %v", tt.response, got, tt.want)
		}
		if got := arithFmt.Reward(p, tt.response); got != tt.wantFmt {
			t.Errorf("arith FormatWeight 0.1 Reward(%q) = %v, want %v", tt.response, got, tt.wantFmt)
		}
	}
	if got := arith.Reward(Problem{Answer: "-7"}, "#### -007"); got != 1 {
		t.Errorf("negative answers: Reward = %v, want 1", got)
	}

	cd := mustNew(t, "countdown", Options{FormatWeight: 0.2})
	q := Problem{Question: "Make 24 from 3 5 8 25", Answer: "3*8"}
	cdTests := []struct {
		response string
		want     float64
	}{
		{"#### 3*8", 1},
		{"#### (25-5+3)+8-3-5+3", 0}, // reuses 5 and 3
		{"#### 8*3", 1},
		{"#### (5-3)*8+25-25", 0}, // reuses 25
		{"#### 25-5+3", 0.2},      // valid, wrong value
		{"#### 24", 0},            // 24 is not given
		{"#### 3*8*1", 0},         // 1 is not given
		{"#### 3**8", 0},
		{"3*8", 0},
	}
	for _, tt := range cdTests {
		if got := cd.Reward(q, tt.response); got != tt.want {
			t.Errorf("countdown Reward(%q) = %v, want %v", tt.response, got, tt.want)
		}
	}
	if got := cd.Reward(Problem{Question: "garbage"}, "#### 1"); got != 0 {
		t.Errorf("countdown Reward with unparseable question = %v, want 0", got)
	}
}

func TestExtract(t *testing.T) {
	arith := mustNew(t, "arith", Options{}).(Extractor)
	cd := mustNew(t, "countdown", Options{}).(Extractor)
	tests := []struct {
		x        Extractor
		response string
		want     string
		ok       bool
	}{
		{arith, "x\n#### 0085", "85", true},
		{arith, "#### -0", "0", true},
		{arith, "#### 1.5", "", false},
		{arith, "no answer", "", false},
		{cd, "#### ( 3 + 5 ) * 8", "(3+5)*8", true},
		{cd, "####   ", "", false},
	}
	for _, tt := range tests {
		got, ok := tt.x.Extract(tt.response)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s.Extract(%q) = %q, %v; want %q, %v", tt.x.Name(), tt.response, got, ok, tt.want, tt.ok)
		}
	}
}

func TestFinalAnswer(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"#### 85", "85", true},
		{"a\n####85\nb", "85", true},
		{"#### 1\n#### 2 ", "2", true},
		{"####", "", false},
		{"#### \n", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		got, ok := FinalAnswer(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("FinalAnswer(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestCountdownRendering(t *testing.T) {
	leaf := func(v int) *cdNode { return &cdNode{value: v} }
	bin := func(op byte, l, r *cdNode) *cdNode { return &cdNode{op: op, l: l, r: r} }
	tests := []struct {
		n    *cdNode
		want string
	}{
		{bin('-', leaf(9), bin('-', leaf(5), leaf(2))), "9-(5-2)"},
		{bin('-', bin('-', leaf(9), leaf(5)), leaf(2)), "9-5-2"},
		{bin('+', leaf(9), bin('+', leaf(5), leaf(2))), "9+5+2"},
		{bin('+', leaf(9), bin('-', leaf(5), leaf(2))), "9+(5-2)"},
		{bin('*', bin('+', leaf(1), leaf(2)), leaf(3)), "(1+2)*3"},
		{bin('/', leaf(8), bin('*', leaf(2), leaf(2))), "8/(2*2)"},
		{bin('*', leaf(8), bin('/', leaf(4), leaf(2))), "8*(4/2)"},
		{bin('+', bin('*', leaf(8), leaf(4)), leaf(2)), "8*4+2"},
	}
	for _, tt := range tests {
		if got := tt.n.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

func TestParseCountdown(t *testing.T) {
	target, nums, err := ParseCountdown(countdownQuestion(24, []int{3, 5, 8, 25}))
	if err != nil || target != 24 || !slices.Equal(nums, []int{3, 5, 8, 25}) {
		t.Errorf("round trip: %d %v %v", target, nums, err)
	}
	for _, bad := range []string{"", "Make 24", "Make x from 1 2", "Make 24 from 1 two", "Take 24 from 1 2"} {
		if _, _, err := ParseCountdown(bad); err == nil {
			t.Errorf("ParseCountdown(%q) accepted", bad)
		}
	}
}

func TestEqual(t *testing.T) {
	arith := mustNew(t, "arith", Options{}).(Extractor)
	cd := mustNew(t, "countdown", Options{}).(Extractor)
	tests := []struct {
		x    Extractor
		a, b string
		want bool
	}{
		{arith, "85", "085", true},
		{arith, "-0", "0", true},
		{arith, "85", "86", false},
		{arith, "x", "x", false},
		{cd, "(3+5)*8", "( 3+5 ) * 8", true},
		{cd, "(3+5)*8", "8*(3+5)", false},
	}
	for _, tt := range tests {
		if got := tt.x.Equal(tt.a, tt.b); got != tt.want {
			t.Errorf("%s.Equal(%q, %q) = %v, want %v", tt.x.Name(), tt.a, tt.b, got, tt.want)
		}
	}
}

func TestUnknownSplitPanics(t *testing.T) {
	tk := mustNew(t, "countdown", Options{})
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), `unknown split "val"`) {
			t.Errorf("recovered %v, want an unknown split panic", r)
		}
	}()
	tk.Problem("val", 0)
}
