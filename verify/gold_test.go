package verify

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hacrl/hacrl/internal/shared"
)

var update = flag.Bool("update", false, "rewrite testdata/gold_equal_pairs.txt from the current checker")

// benchmarkNames are the benchmark directories under shared.Benchmarks().
var benchmarkNames = []string{"gsm8k", "aime24", "amc23", "minerva_math"}

var (
	goldOnce sync.Once
	golds    map[string][]string
	goldErr  error
)

// goldAnswers loads the reference answers of every benchmark following the
// rules of the shared data README: GSM8K's number after "####", AIME's and
// AMC's "answer" field, Minerva's last \boxed{} in "solution".
func goldAnswers(tb testing.TB) map[string][]string {
	tb.Helper()
	goldOnce.Do(func() { golds, goldErr = loadGolds() })
	if goldErr != nil {
		tb.Fatal(goldErr)
	}
	return golds
}

func loadGolds() (map[string][]string, error) {
	dir, err := shared.Benchmarks()
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, name := range benchmarkNames {
		path := filepath.Join(dir, name, "test.jsonl")
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for line := 1; sc.Scan(); line++ {
			var rec struct {
				Answer   json.RawMessage `json:"answer"`
				Solution string          `json:"solution"`
			}
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				f.Close()
				return nil, fmt.Errorf("%s:%d: %w", path, line, err)
			}
			gold, err := goldOf(name, rec.Answer, rec.Solution)
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("%s:%d: %w", path, line, err)
			}
			out[name] = append(out[name], gold)
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return out, nil
}

func goldOf(bench string, answer json.RawMessage, solution string) (string, error) {
	switch bench {
	case "gsm8k":
		var s string
		if err := json.Unmarshal(answer, &s); err != nil {
			return "", err
		}
		k := strings.LastIndex(s, "####")
		if k < 0 {
			return "", fmt.Errorf("no #### in answer")
		}
		return strings.TrimSpace(s[k+4:]), nil
	case "minerva_math":
		g, ok := lastBoxed(solution)
		if !ok {
			return "", fmt.Errorf("no \\boxed{} in solution")
		}
		return g, nil
	}
	var s string
	if err := json.Unmarshal(answer, &s); err == nil {
		return s, nil
	}
	var n json.Number
	if err := json.Unmarshal(answer, &n); err != nil {
		return "", fmt.Errorf("answer is neither string nor number: %s", answer)
	}
	return n.String(), nil
}

// TestGoldAnswersParse checks that every gold answer parses into a tree, so
// that it is compared mathematically rather than as text.
func TestGoldAnswersParse(t *testing.T) {
	for bench, gs := range goldAnswers(t) {
		for i, g := range gs {
			if _, err := parse(Normalize(g)); err != nil {
				t.Errorf("%s #%d: %q (normalized %q): %v", bench, i, g, Normalize(g), err)
			}
		}
	}
}

// TestGoldAnswersEqualRewritings checks every gold answer against itself,
// boxed in a sentence, and rewritten the way models write answers.
func TestGoldAnswersEqualRewritings(t *testing.T) {
	total := 0
	for bench, gs := range goldAnswers(t) {
		if len(gs) == 0 {
			t.Fatalf("%s: no gold answers", bench)
		}
		for i, g := range gs {
			forms := append([]string{g, "The final answer is $\\boxed{" + g + "}$."}, rewritings(g)...)
			for _, f := range forms {
				total++
				if !EqualResponse(f, g) && !Equal(f, g) {
					t.Errorf("%s #%d: %q not equal to gold %q", bench, i, f, g)
				}
				if !strings.Contains(f, "boxed") && !Equal(g, f) {
					t.Errorf("%s #%d: gold %q not equal to %q (asymmetric)", bench, i, g, f)
				}
			}
		}
	}
	t.Logf("%d rewritings checked", total)
}

var (
	intRe = regexp.MustCompile(`^[-+]?\d+$`)
	decRe = regexp.MustCompile(`^[-+]?\d*\.\d+$`)
	sciRe = regexp.MustCompile(`^([-+]?\d*\.?\d+)e([-+]?\d+)$`)
)

// rewritings returns forms of gold that a model could produce: 27.0 → 27,
// fraction ⇄ decimal, thousands separators, units, \text{}, $…$ delimiters,
// \dfrac, \displaystyle and scientific notation.
func rewritings(gold string) []string {
	g := strings.TrimSpace(gold)
	plain := strings.ReplaceAll(g, ",", "")
	out := []string{"$" + g + "$", `\displaystyle ` + g, " " + g + " "}
	if strings.Contains(g, `\frac`) {
		out = append(out, strings.ReplaceAll(g, `\frac`, `\dfrac`))
	}
	switch {
	case intRe.MatchString(plain):
		r, _ := new(big.Rat).SetString(plain)
		n := r.Num()
		out = append(out,
			n.String(), n.String()+".0", n.String()+".00",
			`\text{`+n.String()+`}`, n.String()+` \text{ units}`, n.String()+" dollars",
			`\$`+n.String(), n.String()+`\,\text{cm}`, n.String()+".",
			`\frac{`+new(big.Int).Mul(n, big.NewInt(2)).String()+`}{2}`)
		if s := withThousands(n.String()); s != n.String() {
			out = append(out, s, strings.ReplaceAll(s, ",", "{,}"), strings.ReplaceAll(s, ",", `\,`))
		}
	case decRe.MatchString(plain):
		r, _ := new(big.Rat).SetString(plain)
		out = append(out, plain+"0", plain+`\text{ m}`, fracLaTeX(r))
		if r.Sign() > 0 {
			out = append(out, `\frac{`+r.Num().String()+`}{`+r.Denom().String()+`}`)
		}
	case sciRe.MatchString(plain):
		m := sciRe.FindStringSubmatch(plain)
		out = append(out, m[1]+` \times 10^{`+m[2]+`}`, m[1]+`\cdot 10^{`+m[2]+`}`, strings.ToUpper(plain))
		r, _ := new(big.Rat).SetString(plain)
		out = append(out, fracLaTeX(r))
		if f, _ := r.Float64(); f != 0 {
			out = append(out, fmt.Sprintf("%.6g", f))
		}
	default:
		out = append(out, strings.ReplaceAll(g, " ", "  "), strings.ReplaceAll(g, `\frac`, ` \frac`))
	}
	return out
}

// fracLaTeX writes r as \frac{p}{q}, with a leading minus sign if negative.
func fracLaTeX(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	sign := ""
	if r.Sign() < 0 {
		sign = "-"
	}
	return sign + `\frac{` + new(big.Int).Abs(r.Num()).String() + `}{` + r.Denom().String() + `}`
}

func withThousands(digits string) string {
	neg := strings.HasPrefix(digits, "-")
	digits = strings.TrimPrefix(digits, "-")
	var b strings.Builder
	for i, c := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// goldPairsFile lists, per benchmark, the pairs of distinct gold texts that
// the checker judges equal; each was inspected by hand and is a true
// equivalence.
const goldPairsFile = "testdata/gold_equal_pairs.txt"

// TestGoldPairs judges all pairs of distinct gold answers within each
// benchmark and compares the equal ones with the checked-in list, so a new
// false "equal" (or a lost true one) fails the test. Equality must also be
// symmetric.
func TestGoldPairs(t *testing.T) {
	var got []string
	for _, bench := range benchmarkNames {
		gs := goldAnswers(t)[bench]
		uniq := slices.Compact(slices.Sorted(slices.Values(gs)))
		for i := range uniq {
			for j := i + 1; j < len(uniq); j++ {
				ab, ba := Equal(uniq[i], uniq[j]), Equal(uniq[j], uniq[i])
				if ab != ba {
					t.Errorf("%s: Equal(%q, %q) = %v but reversed %v", bench, uniq[i], uniq[j], ab, ba)
				}
				if ab {
					got = append(got, fmt.Sprintf("%s\t%q\t%q", bench, uniq[i], uniq[j]))
				}
			}
		}
	}
	if *update {
		data := "# benchmark\tgold A\tgold B — distinct gold answers judged equal; each is a true equivalence\n" +
			strings.Join(got, "\n") + "\n"
		if err := writeFileAtomic(goldPairsFile, []byte(data)); err != nil {
			t.Fatal(err)
		}
		return
	}
	data, err := os.ReadFile(goldPairsFile)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	var want []string
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			want = append(want, l)
		}
	}
	for _, p := range got {
		if !slices.Contains(want, p) {
			t.Errorf("new pair judged equal, not in %s: %s", goldPairsFile, p)
		}
	}
	for _, p := range want {
		if !slices.Contains(got, p) {
			t.Errorf("pair in %s no longer judged equal: %s", goldPairsFile, p)
		}
	}
}

func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// BenchmarkEqualBenchmarks measures checks per second over the benchmarks'
// gold answers: each gold against a rewriting of itself and against the next
// gold of its benchmark.
func BenchmarkEqualBenchmarks(b *testing.B) {
	type pair struct{ a, r string }
	var pairs []pair
	for _, bench := range benchmarkNames {
		gs := goldAnswers(b)[bench]
		for i, g := range gs {
			rw := rewritings(g)
			pairs = append(pairs, pair{rw[i%len(rw)], g}, pair{gs[(i+1)%len(gs)], g})
		}
	}
	b.ResetTimer()
	checks := 0
	for i := 0; b.Loop(); i++ {
		p := pairs[i%len(pairs)]
		Equal(p.a, p.r)
		checks++
	}
	b.ReportMetric(float64(checks)/b.Elapsed().Seconds(), "checks/s")
}
