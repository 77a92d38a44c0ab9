package verify

import (
	"strings"
	"testing"
	"time"
)

func TestEqual(t *testing.T) {
	tests := []struct {
		answer, reference string
		want              bool
	}{
		// Integers, decimals, fractions.
		{"27", "27.0", true},
		{"27.0", "27", true},
		{"025", "25", true},
		{"+2", "2", true},
		{"-1./3", `-\frac{1}{3}`, true},
		{"0.5", `\frac{1}{2}`, true},
		{`\frac12`, "0.5", true},
		{`\dfrac{3}{4}`, `\tfrac34`, true},
		{"3/4", `\frac{3}{4}`, true},
		{"0.333", `\frac{1}{3}`, false},
		// A decimal matches what it can be a rounding of, however large.
		{"3159.1", "3159", false},
		{"3159.1", "3159.0", false},
		{"1450000.5", "1450000", false},
		{"4.66667", `\frac{14}{3}`, true},
		{"-2.66667", `-\frac{8}{3}`, true},
		{"1.45e6", "1450000", true},
		{"0.33333", `\frac{1}{3}`, true},
		{"1/2", "2", false},
		{"12", "21", false},
		{"1450000", "1450001", false},
		{`3\frac{1}{2}`, "3.5", true},
		{`-2\frac{1}{4}`, "-2.25", true},
		{`2\frac{\pi}{3}`, `\frac{2\pi}{3}`, true},
		// Scientific notation and tolerance.
		{`1.2 \times 10^{3}`, "1200", true},
		{"1.2e3", "1200", true},
		{`4.5 \times 10^{33}`, "4.5e33", true},
		{"4.5e33", "4.6e33", false},
		{"1e-5", `10^{-5}`, true},
		{"3.14", `\pi`, false},
		{"3.14159", `\pi`, true},
		{"20.39", "20.3901", true},
		{"20.39", "20.4", false},
		// Separators, units, text, delimiters.
		{"1,000", "1000", true},
		{"1{,}000", "1000", true},
		{`1\,000`, "1000", true},
		{"1,450,000", "1450000", true},
		{`\$18`, "18", true},
		{`18 \text{ dollars}`, "18", true},
		{"18 dollars", "18", true},
		{`5\text{ cm}`, "5", true},
		{`1.6 \mathrm{~cm}`, "1.6", true},
		{"90^\\circ", "90", true},
		{"90^{\\circ}", "90", true},
		{"90 degrees", "90", true},
		{`\text{27}`, "27", true},
		{`$\displaystyle\frac{1}{2}$`, "0.5", true},
		{"5.", "5", true},
		{`\left( 1, 2 \right)`, "(1,2)", true},
		{`3 \mathrm{~m} / \mathrm{s}`, "3", true},
		// Percentages.
		{`50\%`, "0.5", true},
		{`50\%`, "50", true},
		{"0.5", `50\%`, true},
		{"50", `50\%`, true},
		{`-5\%`, "-5", true},
		{"-5", `-5\%`, true},
		{`-5\%`, "-0.05", true},
		{`-5\%`, "5", false},
		{"50 percent", "50", true},
		{"10", "100", false},
		{`10\%`, "100", false},
		{`10\%`, "1000", false},
		{"0.5", "50", false},
		// Tuples, intervals, sets, lists.
		{"(1,2)", "(1, 2)", true},
		{"(1,2)", "(2,1)", false},
		{"(1,2)", "[1,2]", false},
		{"[1,2)", "[1,2)", true},
		{"[1,2)", "[1,2]", false},
		{`(-\infty, 3]`, `\left(-\infty,3\right]`, true},
		{`(-\infty, 3]`, `(-\infty, 3)`, false},
		{`(-\infty,1)\cup(2,\infty)`, `(2,\infty)\cup(-\infty,1)`, true},
		{`(-\infty,1)\cup(2,\infty)`, `(-\infty,1]\cup(2,\infty)`, false},
		{"1, 2", "2,1", true},
		{"1, 2", "1, 3", false},
		{"1, 2", "1", false},
		{`\{1, 2\}`, `\{2, 1\}`, true},
		{`x = 1 \text{ or } x = 2`, "1, 2", true},
		{`x=2 \text{ and } x=1`, "1,2", true},
		{"x = 3", "3", true},
		{"3", "x = 3", true},
		{"2x = 6", "6", false},
		{"y = 2x + 1", "y = 1 + 2x", true},
		{"y = 2x + 1", "2x - y + 1 = 0", true},
		{"y = 2x + 1", "y = 2x - 1", false},
		{`1 \pm \sqrt2`, `1+\sqrt{2}, 1-\sqrt{2}`, true},
		{`1 \pm \sqrt2`, `1+\sqrt{2}`, false},
		{`\pm 3`, "3, -3", true},
		{"E_{1},E_{2}", "E_2, E_1", true},
		// Multiple choice.
		{"(B)", "B", true},
		{`\text{(B)}`, "B", true},
		{`\textbf{(C)}`, "(C)", true},
		{"(B)", "C", false},
		// Matrices.
		{`\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}`, `\begin{bmatrix}1&2\\3&4\end{bmatrix}`, true},
		{`\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}`, `\begin{pmatrix}1&2\\4&3\end{pmatrix}`, false},
		{`\begin{pmatrix} 0.5 \\ 1 \end{pmatrix}`, `\begin{pmatrix}\frac12 \\ 1\end{pmatrix}`, true},
		{`\begin{pmatrix} 1 & 2 \end{pmatrix}`, `\begin{pmatrix}1 \\ 2\end{pmatrix}`, false},
		// Symbolic expressions.
		{`\sqrt{2}/2`, `\frac{\sqrt2}{2}`, true},
		{`\frac{1}{\sqrt2}`, `\frac{\sqrt{2}}{2}`, true},
		{`\sqrt{8}`, `2\sqrt{2}`, true},
		{`\sqrt{12}`, `2\sqrt{2}`, false},
		{"x^2", "x^3", false},
		{"x^2 + 2x + 1", "(x+1)^2", true},
		{"(x+1)(x-1)", "x^2-1", true},
		{"2x", "x + x", true},
		{"2x", "x^2", false},
		{`3\pi`, `\pi + 2\pi`, true},
		{`\frac{\pi}{2}`, `\pi/2`, true},
		{`\frac{\pi}{2}`, `\frac{\pi}{3}`, false},
		{`\sin^2 x + \cos^2 x`, "1", true},
		{`e^{i\pi}`, "-1", true},
		{`\ln 8`, `3\ln 2`, true},
		{`\log_2 8`, "3", true},
		{`\frac{e^{t}}{3}`, `e^t / 3`, true},
		{"I(0)", "0", false},
		{"u(t)", "t u", false},
		{`1+\sqrt{3} i`, `1 + i\sqrt{3}`, true},
		{`1+\sqrt{3} i`, `1 - i\sqrt{3}`, false},
		{`2^{10}`, "1024", true},
		{`5!`, "120", true},
		{`\binom{5}{2}`, "10", true},
		{`\frac{1}{2a}(e^{a t} - e^{-a t})`, `\frac{e^{at}-e^{-at}}{2a}`, true},
		{`\frac{dM}{dt} = 3M`, "3M", true},
		// Forms of Minerva gold answers.
		{`\frac{1}{2}(\exp{a*t} + \exp{-a*t})`, `\cosh(at)`, true},
		{`np.arcsin(10/13)`, `\arcsin(10/13)`, true},
		{`np.arcsin(10/13)`, `\arccos(10/13)`, false},
		{`\sqrt{2} \cos (2 t-\pi / 4)`, `\cos(2t) + \sin(2t)`, true},
		{`\sqrt{2} \cos (2 t-\pi / 4)`, `\cos(2t) - \sin(2t)`, false},
		{`y^{\prime}+r y-r x(t)=0`, `y' = r x(t) - r y`, true},
		{`\frac{d x}{d t}=k x-a`, `kx - a`, true},
		{`\frac{d x}{d t}=k x-a`, `kx + a`, false},
		{`x_{0} \cos (\omega t)+$ $\dot{x}_{0} \sin (\omega t) / \omega`, `x_0\cos(\omega t) + \frac{\dot{x}_0}{\omega}\sin(\omega t)`, true},
		{`\frac{4 A}{3+3 i} e^{i t}`, `\frac{2A(1-i)}{3} e^{it}`, true},
		{`\frac{4 A}{3+3 i} e^{i t}`, `\frac{2A(1+i)}{3} e^{it}`, false},
		{`\lambda_{\text {red}} / \sqrt{2}`, `\frac{\sqrt2}{2}\lambda_{red}`, true},
		{`\frac{37}{4} m`, `9.25 \text{ m}`, true},
		{`\ln 2 + i\pi / 3`, `\ln(2) + \frac{\pi i}{3}`, true},
		{`m \frac{d v}{d t}+b v=f`, `m\frac{dv}{dt} = f - bv`, true},
		{`100 p^{\frac{1}{2}}`, `100\sqrt{p}`, true},
		{`7.6 Z`, `7.6`, false},
		{"1.4903e4", "14903", true},
		{"6.5e-2", "0.065", true},
		{"a", "b", false},
		{"MR=SRMC", "SRAC=LRAC", false},
		{`\alpha`, `\beta`, false},
		{`x_{0}`, "x_0", true},
		{`x_{0}`, "x_1", false},
		{"", "1", false},
		{"1", "", false},
		{`\frac{1}{0}`, `\frac{2}{0}`, false},
	}
	for _, tt := range tests {
		if got := Equal(tt.answer, tt.reference); got != tt.want {
			t.Errorf("Equal(%q, %q) = %v, want %v", tt.answer, tt.reference, got, tt.want)
		}
	}
}

// TestEqualBounded checks that adversarial inputs are rejected quickly
// instead of hanging, panicking or allocating without bound.
func TestEqualBounded(t *testing.T) {
	tests := []struct{ name, answer, reference string }{
		{"tower", `9^{9^{9^{9}}}`, `9^{9^{9^{9}}}+1`},
		{"tower vs inf", `9^{9^{9^{9}}}`, `\infty`},
		{"big exponent", `2^{100000000}`, `2^{100000001}`},
		{"factorial", `100000000!`, `100000001!`},
		{"literal exponent", `1e999999999`, `1e999999998`},
		{"deep parens", strings.Repeat("(", 5000) + "1" + strings.Repeat(")", 5000), "1"},
		{"deep braces", strings.Repeat(`\frac{`, 2000) + "1", "1"},
		{"megabyte", strings.Repeat("1+", 500000) + "1", "1000001"},
		{"long digits", strings.Repeat("9", MaxAnswerLen-1), strings.Repeat("9", MaxAnswerLen-2) + "8"},
		{"many pm", strings.Repeat(`1\pm `, 200) + "1", "1"},
		{"many elements", strings.Repeat("1,", 1000) + "1", strings.Repeat("1,", 1000) + "2"},
		{"nested sqrt", strings.Repeat(`\sqrt{`, 60) + "2" + strings.Repeat("}", 60), "1"},
		{"unbalanced", `\frac{1}{`, `\frac{1}{2}`},
		{"begin only", `\begin{pmatrix}1&`, "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			if Equal(tt.answer, tt.reference) {
				t.Errorf("Equal(%.40q..., %.40q...) = true, want false", tt.answer, tt.reference)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

func TestEqualAnswer(t *testing.T) {
	for _, tc := range []struct {
		answer, reference string
		want              bool
	}{
		{`\frac{1}{2}`, `\frac{1}{2}`, true}, // extraction alone would keep "2"
		{`\frac{1}{2}`, `0.5`, true},
		{`3\sqrt{2}`, `3\sqrt2`, true},
		{`[1,2)`, `[1,2)`, true},
		{`The answer is \boxed{27}.`, `27.0`, true},
		{`\boxed{27}`, `27`, true},
		{`x=3`, `3`, true},
		{`\frac{1}{2}`, `2`, false},
		{`so it is \boxed{4}`, `3`, false},
		{`1, 2`, `2`, false},
		{`so we get 42 apples`, `42`, true},
		{`\\text{cm}`, `2`, false},
	} {
		if got := EqualAnswer(tc.answer, tc.reference); got != tc.want {
			t.Errorf("EqualAnswer(%q, %q) = %v, want %v", tc.answer, tc.reference, got, tc.want)
		}
	}
}
