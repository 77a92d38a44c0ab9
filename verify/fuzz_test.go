package verify

import (
	"strings"
	"testing"
	"time"
)

// FuzzEqual checks that the checker never panics, stays fast, is symmetric
// and is reflexive on any input.
func FuzzEqual(f *testing.F) {
	seeds := [][2]string{
		{"27", "27.0"}, {`\frac12`, "0.5"}, {`1 \pm \sqrt2`, `1+\sqrt2,1-\sqrt2`},
		{`(-\infty,1)\cup(2,\infty)`, `[1,2)`}, {`\begin{pmatrix}1&2\\3&4\end{pmatrix}`, "x=3"},
		{`9^{9^{9^{9}}}`, `100!`}, {`\sin^2 x+\cos^2 x`, "1"}, {`50\%`, "0.5"}, {`\text{(B)}`, "B"},
		{`x_{0} \cos (\omega t)+$ $\dot{x}_{0} \sin (\omega t) / \omega`, `\frac{dM}{dt}=3M`},
		{`\sqrt[3]{-8}`, `\binom{5}{2}`}, {`\lfloor 2.5 \rfloor`, `|{-2}|`}, {"1,000", "1{,}000"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		start := time.Now()
		ab := equalStrings(a, b)
		ba := equalStrings(b, a)
		if ab != ba {
			t.Errorf("Equal(%q, %q) = %v but reversed %v", a, b, ab, ba)
		}
		if s := strings.TrimSpace(a); s != "" && len(a) <= MaxAnswerLen && !equalStrings(a, a) {
			t.Errorf("Equal(%q, itself) = false", a)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("Equal(%q, %q) took %v", a, b, d)
		}
	})
}

// FuzzExtract checks that extraction never panics, stays fast, and returns
// a substring of the response.
func FuzzExtract(f *testing.F) {
	for _, s := range []string{
		`So $x = \boxed{5}$.`, `\boxed{\frac{1}{\sqrt{2}}}`, `\fbox{12} \boxed{`, "#### 18",
		"The answer is $3$.", "t = -0.75 s", `\boxed 7$`, "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, response string) {
		start := time.Now()
		got, ok := extract(response)
		if ok && !strings.Contains(response, got) {
			t.Errorf("Extract(%q) = %q, not part of the response", response, got)
		}
		if !ok && got != "" {
			t.Errorf("Extract(%q) = %q with ok = false", response, got)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("Extract(%q) took %v", response, d)
		}
	})
}
