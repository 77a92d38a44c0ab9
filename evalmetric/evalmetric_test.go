package evalmetric

import (
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestAccuracy(t *testing.T) {
	if got, err := Accuracy([]bool{true, false, true, true}); err != nil || got != 0.75 {
		t.Errorf("Accuracy = %v, %v; want 0.75", got, err)
	}
	if _, err := Accuracy(nil); err != ErrNoProblems {
		t.Errorf("Accuracy(nil) error = %v", err)
	}
}

func TestAvgAtK(t *testing.T) {
	correct := [][]bool{
		{true, false, true, true, false}, // first 4: 3/4
		{false, false, false, true},      // 1/4
	}
	if got, err := AvgAtK(correct, 4); err != nil || got != 0.5 {
		t.Errorf("AvgAtK(4) = %v, %v; want 0.5", got, err)
	}
	if got, err := AvgAtK(correct, 1); err != nil || got != 0.5 {
		t.Errorf("AvgAtK(1) = %v, %v; want 0.5", got, err)
	}
	if _, err := AvgAtK(correct, 5); err == nil || !strings.Contains(err.Error(), "problem 1 has 4 samples") {
		t.Errorf("AvgAtK(5) error = %v", err)
	}
	if _, err := AvgAtK(correct, 0); err == nil {
		t.Error("AvgAtK(0) accepted")
	}
}

// passAtKExact is 1 − C(n−c, k)/C(n, k) in exact arithmetic.
func passAtKExact(n, c, k int) float64 {
	if n-c < k {
		return 1
	}
	num := new(big.Int).Binomial(int64(n-c), int64(k))
	den := new(big.Int).Binomial(int64(n), int64(k))
	r := new(big.Rat).SetFrac(num, den)
	f, _ := new(big.Rat).Sub(big.NewRat(1, 1), r).Float64()
	return f
}

func TestPassAtKByHand(t *testing.T) {
	tests := []struct {
		n, c, k int
		want    float64
	}{
		{10, 0, 1, 0},
		{10, 10, 1, 1},
		{10, 10, 10, 1},
		{10, 1, 10, 1}, // n = k: any correct sample makes pass@n 1
		{10, 0, 10, 0}, // n = k with none correct
		{5, 3, 5, 1},
		{10, 3, 1, 0.3},                    // pass@1 = c/n
		{4, 1, 2, 0.5},                     // 1 − C(3,2)/C(4,2) = 1 − 3/6
		{5, 2, 2, 0.7},                     // 1 − C(3,2)/C(5,2) = 1 − 3/10
		{6, 2, 3, 0.8},                     // 1 − C(4,3)/C(6,3) = 1 − 4/20
		{10, 8, 3, 1},                      // n − c < k
		{16, 1, 8, 0.5},                    // 1 − C(15,8)/C(16,8) = 1 − 8/16
		{100, 2, 10, 1 - 90*89.0/(100*99)}, // 1 − C(98,10)/C(100,10)
	}
	for _, tt := range tests {
		got, err := PassAtK(tt.n, tt.c, tt.k)
		if err != nil || !near(got, tt.want, 1e-12) {
			t.Errorf("PassAtK(%d, %d, %d) = %v, %v; want %v", tt.n, tt.c, tt.k, got, err, tt.want)
		}
	}
	for _, bad := range [][3]int{{10, 11, 1}, {10, -1, 1}, {10, 2, 0}, {10, 2, 11}, {0, 0, 1}} {
		if _, err := PassAtK(bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("PassAtK%v accepted", bad)
		}
	}
}

func TestPassAtKIsStableForLargeN(t *testing.T) {
	for _, tt := range [][3]int{{1000, 5, 100}, {1000, 1, 1}, {2000, 3, 1999}, {500, 250, 7}, {10000, 1, 9}} {
		n, c, k := tt[0], tt[1], tt[2]
		got, err := PassAtK(n, c, k)
		want := passAtKExact(n, c, k)
		if err != nil || !near(got, want, 1e-12*math.Max(1, want)) {
			t.Errorf("PassAtK(%d, %d, %d) = %.17g, %v; exact %.17g", n, c, k, got, err, want)
		}
	}
}

// TestPassAtKIsUnbiased checks E[PassAtK(n, C, k)] = 1 − (1−p)^k for
// C ~ Binomial(n, p), exactly over the binomial distribution and by Monte Carlo.
func TestPassAtKIsUnbiased(t *testing.T) {
	for _, tt := range []struct {
		n, k int
		p    float64
	}{{10, 3, 0.3}, {8, 8, 0.1}, {16, 4, 0.05}, {5, 1, 0.9}} {
		truth := 1 - math.Pow(1-tt.p, float64(tt.k))
		expect := 0.0
		for c := 0; c <= tt.n; c++ {
			b, _ := new(big.Float).SetInt(new(big.Int).Binomial(int64(tt.n), int64(c))).Float64()
			prob := b * math.Pow(tt.p, float64(c)) * math.Pow(1-tt.p, float64(tt.n-c))
			est, err := PassAtK(tt.n, c, tt.k)
			if err != nil {
				t.Fatal(err)
			}
			expect += prob * est
		}
		if !near(expect, truth, 1e-12) {
			t.Errorf("n=%d k=%d p=%v: E[estimate] = %v, want %v", tt.n, tt.k, tt.p, expect, truth)
		}

		r := rand.New(rand.NewPCG(1, uint64(tt.n*100+tt.k)))
		const trials = 20000
		sum, naive := 0.0, 0.0
		for range trials {
			c := 0
			for range tt.n {
				if r.Float64() < tt.p {
					c++
				}
			}
			est, _ := PassAtK(tt.n, c, tt.k)
			sum += est
			naive += 1 - math.Pow(1-float64(c)/float64(tt.n), float64(tt.k))
		}
		// The estimate is in [0, 1], so its standard error is at most 0.5/√trials ≈ 0.0035.
		if mean := sum / trials; !near(mean, truth, 0.015) {
			t.Errorf("n=%d k=%d p=%v: Monte Carlo mean %v, want %v", tt.n, tt.k, tt.p, mean, truth)
		}
		// The plug-in estimate 1 − (1 − c/n)^k is biased (about −0.043 here);
		// the check above would catch an estimator that were.
		if tt.n == 10 && tt.k == 3 && near(naive/trials, truth, 0.03) {
			t.Errorf("plug-in estimator mean %v unexpectedly close to %v: the Monte Carlo check has no power", naive/trials, truth)
		}
	}
}

func TestMeanPassAtK(t *testing.T) {
	correct := [][]bool{
		{true, false, false, false}, // n=4 c=1 k=2: 0.5
		{true, true, true, true},    // 1
		{false, false, false},       // 0
	}
	got, err := MeanPassAtK(correct, 2)
	if err != nil || !near(got, 0.5, 1e-15) {
		t.Errorf("MeanPassAtK = %v, %v; want 0.5", got, err)
	}
	if _, err := MeanPassAtK(correct, 4); err == nil {
		t.Error("MeanPassAtK with a problem of 3 samples and k = 4 accepted")
	}
	if _, err := MeanPassAtK(nil, 1); err != ErrNoProblems {
		t.Errorf("MeanPassAtK(nil) error = %v", err)
	}
}

// mathEqual treats "0.5", "1/2" and "\frac{1}{2}" as one answer.
func mathEqual(a, b string) bool {
	canon := func(s string) string {
		switch s {
		case "1/2", `\frac{1}{2}`:
			return "0.5"
		}
		return s
	}
	return canon(a) == canon(b)
}

func ans(a string, correct bool) Sample { return Sample{Answer: a, HasAnswer: true, Correct: correct} }

var none = Sample{}

func TestMajority(t *testing.T) {
	tests := []struct {
		name    string
		samples []Sample
		want    string
		votes   int
		ok      bool
	}{
		{"plain", []Sample{ans("3", false), ans("0.5", true), ans("0.5", true)}, "0.5", 2, true},
		{"equivalent forms vote together", []Sample{ans("3", false), ans("3", false), ans("0.5", true), ans("1/2", true), ans(`\frac{1}{2}`, true)}, "0.5", 3, true},
		{"winner is the group's first form", []Sample{ans("1/2", true), ans("0.5", true)}, "1/2", 2, true},
		{"tie goes to the earliest group", []Sample{ans("7", false), ans("0.5", true), ans("0.5", true), ans("7", false)}, "7", 2, true},
		{"missing answers do not vote", []Sample{none, none, none, ans("4", true)}, "4", 1, true},
		{"no answers", []Sample{none, none}, "", 0, false},
		{"empty", nil, "", 0, false},
	}
	for _, tt := range tests {
		w, votes, ok := Majority(tt.samples, mathEqual)
		if w.Answer != tt.want || votes != tt.votes || ok != tt.ok {
			t.Errorf("%s: Majority = %q, %d, %v; want %q, %d, %v", tt.name, w.Answer, votes, ok, tt.want, tt.votes, tt.ok)
		}
	}
}

func TestMajAtK(t *testing.T) {
	samples := [][]Sample{
		{ans("0.5", true), ans("1/2", true), ans("2", false), ans("2", false), ans("2", false)},
		{ans("9", false), ans("8", true), ans("8", true), none},
		{none, none, none},
		{ans("5", true), ans("6", false), ans("6", false)},
	}
	tests := []struct {
		k    int
		want float64
	}{
		{1, 0.5}, // first answers: 0.5 ✓, 9 ✗, none ✗, 5 ✓
		{3, 0.5}, // 0.5/1/2 win ✓, 8 wins ✓, none ✗, 6 wins ✗
		{2, 0.5}, // 0.5 ✓, tie 9/8 → 9 ✗, none ✗, tie 5/6 → 5 ✓
	}
	for _, tt := range tests {
		got, err := MajAtK(samples, tt.k, mathEqual)
		if err != nil || got != tt.want {
			t.Errorf("MajAtK(k=%d) = %v, %v; want %v", tt.k, got, err, tt.want)
		}
	}
	if _, err := MajAtK(samples, 4, mathEqual); err == nil {
		t.Error("MajAtK with too few samples accepted")
	}
	// Without the equivalence, "2" outvotes the split 0.5 / 1/2 at k = 5.
	got, err := MajAtK(samples[:1], 5, func(a, b string) bool { return a == b })
	if err != nil || got != 0 {
		t.Errorf("MajAtK with string equality = %v, %v; want 0", got, err)
	}
	got, err = MajAtK(samples[:1], 5, mathEqual)
	if err != nil || got != 0 {
		t.Errorf("MajAtK(k=5) = %v, %v; want 0 (three 2s beat two halves)", got, err)
	}
}

func TestCorrect(t *testing.T) {
	got := Correct([][]Sample{{ans("1", true), none}, {ans("2", false)}})
	if len(got) != 2 || !got[0][0] || got[0][1] || got[1][0] {
		t.Errorf("Correct = %v", got)
	}
	avg, err := AvgAtK(got, 1)
	if err != nil || avg != 0.5 {
		t.Errorf("AvgAtK(Correct) = %v, %v", avg, err)
	}
}
