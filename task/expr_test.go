package task

import (
	"errors"
	"math/big"
	"strings"
	"testing"
)

func TestEvalExpression(t *testing.T) {
	nums := []int{3, 5, 8, 25, 25}
	tests := []struct {
		expr      string
		fractions bool
		want      string // value as a RatString, when err is nil
		err       error
	}{
		{"3+5*8", false, "43", nil},
		{"(3+5)*8", false, "64", nil},
		{" 25 - 5 - 3 ", false, "17", nil},
		{"25-(5-3)", false, "23", nil},
		{"25/5*3", false, "15", nil},
		{"25 x 3 ÷ 5", false, "15", nil},
		{"25×8", false, "200", nil},
		{"25+25", false, "50", nil},
		{"3-25", false, "-22", nil},
		{"(((8)))", false, "8", nil},
		{"3/8*25", true, "75/8", nil},
		{"(3/25+5)*25", true, "128", nil},
		{"5/3", true, "5/3", nil},
		{"3/8*25", false, "", ErrNonInteger},
		{"25/3", false, "", ErrNonInteger},
		{"3+3", false, "", ErrNumber},
		{"25+25+25", false, "", ErrNumber},
		{"7", false, "", ErrNumber},
		{"1000000000000", false, "", ErrNumber},
		{"3/(5-5)", false, "", ErrNumber},
		{"8/(3-3)", false, "", ErrNumber},
		{"8/(25-25)", false, "", ErrDivideZero},
		{"-3+8", false, "", ErrSyntax},
		{"3+", false, "", ErrSyntax},
		{"", false, "", ErrSyntax},
		{"(3+5", false, "", ErrSyntax},
		{"3+5)", false, "", ErrSyntax},
		{"3 5", false, "", ErrSyntax},
		{"03+5", false, "", ErrSyntax},
		{"3.0+5", false, "", ErrSyntax},
		{"3^2", false, "", ErrSyntax},
		{"hello", false, "", ErrSyntax},
		{strings.Repeat("(", 17) + "3" + strings.Repeat(")", 17), false, "", ErrTooComplex},
		{strings.Repeat("3+", 200) + "3", false, "", ErrTooComplex},
	}
	for _, tt := range tests {
		v, err := EvalExpression(tt.expr, nums, tt.fractions)
		if tt.err != nil {
			if !errors.Is(err, tt.err) {
				t.Errorf("EvalExpression(%q) error = %v, want %v", tt.expr, err, tt.err)
			}
			continue
		}
		if err != nil || v.RatString() != tt.want {
			t.Errorf("EvalExpression(%q) = %v, %v; want %s", tt.expr, v, err, tt.want)
		}
	}
}

// FuzzEvalExpression checks that the evaluator never panics, and that an
// accepted expression is within the limits, uses only the given numbers,
// and has an integer value unless fractions are allowed.
func FuzzEvalExpression(f *testing.F) {
	for _, s := range []string{"3+5*8", "(3+5)*8/2", "25/(5-5)", "3/8*8", "((((", "9999999999*9", "3 x 5 ÷ 8"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	nums := []int{2, 3, 5, 8, 25, 100}
	f.Fuzz(func(t *testing.T, expr string, fractions bool) {
		v, err := EvalExpression(expr, nums, fractions)
		if err != nil {
			if v != nil {
				t.Fatalf("value %v with error %v", v, err)
			}
			return
		}
		if len(expr) > MaxExpressionLen {
			t.Fatalf("accepted %d bytes", len(expr))
		}
		if !fractions && !v.IsInt() {
			t.Fatalf("%q = %v, not an integer", expr, v)
		}
		// Every number is at most 100 and used once: |v| <= 2*3*5*8*25*100.
		if new(big.Rat).Abs(v).Cmp(big.NewRat(2*3*5*8*25*100, 1)) > 0 {
			t.Fatalf("%q = %v exceeds the bound of the given numbers", expr, v)
		}
	})
}
