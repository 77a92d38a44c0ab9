package verify

import (
	"strings"
	"testing"
	"time"
)

func TestExtract(t *testing.T) {
	tests := []struct {
		name, response, want string
		ok                   bool
	}{
		{"boxed", `So $x = \boxed{5}$.`, "5", true},
		{"last boxed", `First \boxed{3}, then \boxed{4}.`, "4", true},
		{"nested braces", `\boxed{\frac{1}{\sqrt{2}}}`, `\frac{1}{\sqrt{2}}`, true},
		{"fbox", `Answer: \fbox{12}`, "12", true},
		{"boxed space", `\boxed 7$`, "7", true},
		{"unclosed last boxed", `\boxed{2} and \boxed{3`, "2", true},
		{"answer is", "Thus, the answer is 42.", "42", true},
		{"answer is math", `The answer is $\frac{3}{4}$.`, `\frac{3}{4}`, true},
		{"final answer colon", "Final Answer: 3.5\nDone", "3.5", true},
		{"gsm8k", "She makes 9 * 2 = $18.\n#### 18", "18", true},
		{"last number", "We get 3 apples and then 1,250 more", "1,250", true},
		{"last negative decimal", "t = -0.75 seconds", "-0.75", true},
		{"fraction", "the ratio is 3/4", "3/4", true},
		{"nothing", "I do not know.", "", false},
		{"empty", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Extract(tt.response)
			if got != tt.want || ok != tt.ok {
				t.Errorf("Extract(%q) = %q, %v; want %q, %v", tt.response, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestRewardAndEqualResponse(t *testing.T) {
	tests := []struct {
		response, reference string
		want                float64
	}{
		{`The area is $\boxed{\dfrac{1}{2}}$.`, "0.5", 1},
		{`The area is $\boxed{\dfrac{1}{3}}$.`, "0.5", 0},
		{"Janet makes 9 * 2 = $18.\n#### 18", "18", 1},
		{"So the answer is 1,000 dollars.", "1000", 1},
		{"No idea.", "3", 0},
		{`\boxed{x = 2 \text{ or } x = -2}`, `\pm 2`, 1},
	}
	for _, tt := range tests {
		if got := Reward(tt.response, tt.reference); got != tt.want {
			t.Errorf("Reward(%q, %q) = %v, want %v", tt.response, tt.reference, got, tt.want)
		}
		if got := EqualResponse(tt.response, tt.reference); got != (tt.want == 1) {
			t.Errorf("EqualResponse(%q, %q) = %v, want %v", tt.response, tt.reference, got, tt.want == 1)
		}
	}
}

func TestExtractBounded(t *testing.T) {
	inputs := []string{
		strings.Repeat(`\boxed{`, 100000),
		strings.Repeat("1", 3<<20),
		strings.Repeat("the answer is ", 100000),
		strings.Repeat(`\fbox{\boxed{}`, 50000),
	}
	for _, in := range inputs {
		start := time.Now()
		Extract(in)
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("Extract on %d bytes (%.20q...) took %v", len(in), in, d)
		}
	}
}
