package verify_test

import (
	"bufio"
	"flag"
	"fmt"
	"hash/fnv"
	"math/big"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hacrl/hacrl/dataset"
	"github.com/hacrl/hacrl/internal/pyenv"
	"github.com/hacrl/hacrl/verify"
)

var (
	mvFull   = flag.Bool("mathverify.full", false, "TestMathVerifyAgreement: judge every generated pair, not the suite's subset")
	mvReport = flag.String("mathverify.report", "", "TestMathVerifyAgreement: write the agreement table (Markdown) to this file")
	mvDump   = flag.String("mathverify.dump", "", "TestMathVerifyAgreement: write every disagreement, documented or not, to this file (TSV)")
)

// mvBenchmarks are the shared benchmarks whose references are checked, read
// with package dataset's rules (as hacrl eval reads them).
var mvBenchmarks = []string{"math500", "math", "gsm8k", "aime24", "aime25", "amc23", "minerva_math", "olympiadbench"}

// mvDifferencesFile lists the pairs on which hacrl deliberately disagrees
// with math-verify, each with its reason.
const mvDifferencesFile = "testdata/mathverify_differences.txt"

// mvSubsetPerCell bounds the suite's pairs per (benchmark, category): the
// suite judges an evenly spaced subset of each cell; -mathverify.full judges
// all.
const mvSubsetPerCell = 28

// mvPair is one judged pair: a benchmark reference and a model-style answer
// generated from it. Same says whether the answer was generated as a
// rewriting of the reference (meant equal) or as a different answer.
type mvPair struct {
	Bench, Cat   string
	Gold, Answer string
	Same         bool
}

// mvDifference is one documented kind of deliberate difference: the pairs
// whose reference matches gold and whose answer matches answer, on which
// hacrl says hacrl and math-verify says the opposite, for reason.
type mvDifference struct {
	kind             string
	hacrl            bool
	gold, answer     *regexp.Regexp
	exGold, exAnswer string // an example the kind must cover
	reason           string
	line             int
}

// mvPlainText is the kind of difference for answers written without LaTeX
// delimiters, which math-verify reads only as a number: each such excused
// pair is judged again by math-verify with the answer in $...$, and that
// verdict must be hacrl's.
const mvPlainText = "plain-text"

func (d *mvDifference) covers(p mvPair, h bool) bool {
	return h == d.hacrl && d.gold.MatchString(p.Gold) && d.answer.MatchString(p.Answer)
}

// inDollars writes a plain-text answer in LaTeX delimiters, as the same
// model would in LaTeX: "The answer is X." → "The final answer is $X$.".
func inDollars(answer string) string {
	if x, ok := strings.CutPrefix(answer, "The answer is "); ok {
		return dollars(strings.TrimSuffix(x, "."))
	}
	return "$" + answer + "$"
}

// TestMathVerifyAgreement judges every benchmark reference against itself
// and against model-style variants with hacrl (EqualAnswer, as hacrl verify
// does) and with Hugging Face's math-verify, in one Python call, and
// requires the same verdict on every pair except those covered by a kind of
// deliberate difference in testdata/mathverify_differences.txt; every kind
// must still cover its example, which is always judged, so a stale kind
// fails. For a boxed response the RL reward (Reward) must agree with
// EqualAnswer. The suite judges up to mvSubsetPerCell pairs of each
// (benchmark, category), evenly spaced (about 2,000 pairs, 30 s on 2 cores);
// -mathverify.full judges all of them (about 24,000, 150 s).
//
// The full table (docs/verify-agreement.md) is regenerated with
//
//	go test -run TestMathVerifyAgreement -timeout 60m ./verify/ \
//	    -mathverify.full -mathverify.report /tmp/verify-agreement-table.md
func TestMathVerifyAgreement(t *testing.T) {
	diffs := readDifferences(t)
	all := mvPairs(t)
	pairs := all
	if !*mvFull {
		pairs = mvSubset(all)
	}
	// Each documented kind's example is judged too, so that a stale kind
	// fails in the suite as well.
	in := map[[2]string]bool{}
	for _, p := range pairs {
		in[[2]string{p.Gold, p.Answer}] = true
	}
	for _, d := range diffs {
		if !in[[2]string{d.exGold, d.exAnswer}] {
			in[[2]string{d.exGold, d.exAnswer}] = true
			pairs = append(pairs, mvPair{Bench: "example", Cat: "documented example", Gold: d.exGold, Answer: d.exAnswer})
		}
	}
	verdicts := make([]bool, len(pairs))
	for i, p := range pairs {
		verdicts[i] = verify.EqualAnswer(p.Answer, p.Gold)
	}
	hacrlStart := time.Now()
	for _, p := range pairs {
		verify.EqualAnswer(p.Answer, p.Gold)
	}
	hacrlTime := time.Since(hacrlStart)

	// One Python call judges every pair, and, for each plain-text answer
	// that is not a bare number, the same answer in $...$.
	type jpair struct {
		Gold   string `json:"gold"`
		Answer string `json:"answer"`
	}
	var req struct {
		Pairs []jpair `json:"pairs"`
	}
	for _, p := range pairs {
		req.Pairs = append(req.Pairs, jpair{p.Gold, p.Answer})
	}
	companion := map[int]int{} // pair index → index of its $...$ form
	for i, p := range pairs {
		if plainText(p.Answer) {
			companion[i] = len(req.Pairs)
			req.Pairs = append(req.Pairs, jpair{p.Gold, inDollars(p.Answer)})
		}
	}
	var out struct {
		Verdicts     []bool   `json:"verdicts"`
		Seconds      float64  `json:"seconds"`
		GoldUnparsed []string `json:"gold_unparsed"`
	}
	start := time.Now()
	pyenv.Run(t, "testdata/mathverify.py", req, &out)
	pyTime := time.Since(start)
	if len(out.Verdicts) != len(req.Pairs) {
		t.Fatalf("math-verify returned %d verdicts for %d pairs", len(out.Verdicts), len(req.Pairs))
	}

	type cell struct{ n, same, agree, mvEq, hacrlEq, documented int }
	cells := map[string]*cell{}
	excused := make([]int, len(diffs))
	exampleOK := make([]bool, len(diffs))
	failures := 0
	var dump strings.Builder
	for i, p := range pairs {
		h, mv := verdicts[i], out.Verdicts[i]
		if strings.Contains(p.Answer, `\boxed`) {
			if r := verify.Reward(p.Answer, p.Gold) == 1; r != h {
				t.Errorf("%s/%s: Reward(%q, %q) = %v but EqualAnswer = %v", p.Bench, p.Cat, p.Answer, p.Gold, r, h)
			}
		}
		c := cells[p.Cat]
		if c == nil {
			c = &cell{}
			cells[p.Cat] = c
		}
		c.n++
		if p.Same {
			c.same++
		}
		if mv {
			c.mvEq++
		}
		if h {
			c.hacrlEq++
		}
		if h == mv {
			c.agree++
			if p.Same && !h {
				fmt.Fprintf(&dump, "%s\t%s\t%q\t%q\thacrl=%v\tmath-verify=%v\tboth reject a rewriting\n", p.Bench, p.Cat, p.Gold, p.Answer, h, mv)
			}
			continue
		}
		kind := ""
		for k, d := range diffs {
			if !d.covers(p, h) {
				continue
			}
			if d.kind == mvPlainText {
				if j, ok := companion[i]; !ok || out.Verdicts[j] != h {
					continue // math-verify differs in LaTeX too: not this kind
				}
			}
			excused[k]++
			if p.Gold == d.exGold && p.Answer == d.exAnswer {
				exampleOK[k] = true
			}
			kind = d.kind
			break
		}
		fmt.Fprintf(&dump, "%s\t%s\t%q\t%q\thacrl=%v\tmath-verify=%v\t%s\n", p.Bench, p.Cat, p.Gold, p.Answer, h, mv, kind)
		if kind != "" {
			c.documented++
			continue
		}
		failures++
		if failures <= 100 {
			t.Errorf("%s/%s: gold %q, answer %q: hacrl %v, math-verify %v, and no kind of %s covers it", p.Bench, p.Cat, p.Gold, p.Answer, h, mv, mvDifferencesFile)
		}
	}
	if failures > 100 {
		t.Errorf("... %d undocumented disagreements in all", failures)
	}
	for k, d := range diffs {
		if excused[k] == 0 {
			t.Errorf("%s:%d: stale: kind %q covers no disagreement among the %d pairs judged", mvDifferencesFile, d.line, d.kind, len(pairs))
		}
		if !exampleOK[k] {
			t.Errorf("%s:%d: stale: kind %q does not cover its example (gold %q, answer %q): hacrl and math-verify agree on it, or the kind's patterns miss it", mvDifferencesFile, d.line, d.kind, d.exGold, d.exAnswer)
		}
	}
	for _, g := range out.GoldUnparsed {
		t.Logf("math-verify cannot parse the reference %q", g)
	}
	t.Logf("%d pairs judged (%d generated; %d more in $...$ for math-verify): math-verify %.1fs in Python (%.1fs with start-up), hacrl %.3fs",
		len(pairs), len(all), len(companion), out.Seconds, pyTime.Seconds(), hacrlTime.Seconds())

	if *mvDump != "" {
		if err := os.WriteFile(*mvDump, []byte(dump.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if *mvReport != "" {
		var b strings.Builder
		fmt.Fprintf(&b, "| category | pairs | generated equal | generated not equal | hacrl equal | math-verify equal | agree | documented differences | agreement |\n|---|---|---|---|---|---|---|---|---|\n")
		cats := slices.Sorted(func(yield func(string) bool) {
			for k := range cells {
				if !yield(k) {
					return
				}
			}
		})
		var tot cell
		for _, k := range cats {
			c := cells[k]
			fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d | %.2f%% |\n", k, c.n, c.same, c.n-c.same, c.hacrlEq, c.mvEq, c.agree, c.documented, 100*float64(c.agree)/float64(c.n))
			tot.n += c.n
			tot.same += c.same
			tot.agree += c.agree
			tot.mvEq += c.mvEq
			tot.hacrlEq += c.hacrlEq
			tot.documented += c.documented
		}
		fmt.Fprintf(&b, "| **all** | %d | %d | %d | %d | %d | %d | %d | %.2f%% |\n", tot.n, tot.same, tot.n-tot.same, tot.hacrlEq, tot.mvEq, tot.agree, tot.documented, 100*float64(tot.agree)/float64(tot.n))
		fmt.Fprintf(&b, "\n| benchmark | references (distinct, first benchmark to have it) | pairs | agree |\n|---|---|---|---|\n")
		for _, bench := range mvBenchmarks {
			refs := map[string]bool{}
			n, agree := 0, 0
			for i, p := range pairs {
				if p.Bench == bench {
					refs[p.Gold] = true
					n++
					if verdicts[i] == out.Verdicts[i] {
						agree++
					}
				}
			}
			fmt.Fprintf(&b, "| %s | %d | %d | %d |\n", bench, len(refs), n, agree)
		}
		fmt.Fprintf(&b, "\n| kind | hacrl | pairs |\n|---|---|---|\n")
		for k, d := range diffs {
			v := "not equal"
			if d.hacrl {
				v = "equal"
			}
			fmt.Fprintf(&b, "| %s | %s | %d |\n", d.kind, v, excused[k])
		}
		fmt.Fprintf(&b, "\nmath-verify: %.1f s for %d judgements; hacrl: %.3f s for %d.\n", out.Seconds, len(req.Pairs), hacrlTime.Seconds(), len(pairs))
		if err := os.WriteFile(*mvReport, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// readDifferences reads the documented kinds of difference: lines of
// kind<TAB>hacrl verdict (equal|not-equal)<TAB>gold regexp<TAB>answer
// regexp<TAB>example gold<TAB>example answer<TAB>reason, the example as
// Go-quoted strings; # starts a comment line.
func readDifferences(t *testing.T) []mvDifference {
	t.Helper()
	f, err := os.Open(mvDifferencesFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []mvDifference
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Split(line, "\t")
		if len(fields) != 7 {
			t.Fatalf("%s:%d: want 7 tab-separated fields (kind, hacrl verdict, gold regexp, answer regexp, example gold, example answer, reason), got %d", mvDifferencesFile, n, len(fields))
		}
		d := mvDifference{kind: fields[0], reason: fields[6], line: n}
		var err1, err2 error
		d.exGold, err1 = strconv.Unquote(fields[4])
		d.exAnswer, err2 = strconv.Unquote(fields[5])
		if err1 != nil || err2 != nil {
			t.Fatalf("%s:%d: the example gold and answer must be Go-quoted strings: %s, %s", mvDifferencesFile, n, fields[4], fields[5])
		}
		switch fields[1] {
		case "equal":
			d.hacrl = true
		case "not-equal":
		default:
			t.Fatalf("%s:%d: hacrl verdict %q: want equal or not-equal", mvDifferencesFile, n, fields[1])
		}
		if d.gold, err = regexp.Compile(fields[2]); err != nil {
			t.Fatalf("%s:%d: gold regexp: %v", mvDifferencesFile, n, err)
		}
		if d.answer, err = regexp.Compile(fields[3]); err != nil {
			t.Fatalf("%s:%d: answer regexp: %v", mvDifferencesFile, n, err)
		}
		if d.kind == "" || strings.TrimSpace(d.reason) == "" {
			t.Fatalf("%s:%d: a documented difference needs a kind and a reason", mvDifferencesFile, n)
		}
		out = append(out, d)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", mvDifferencesFile, err)
	}
	return out
}

// plainText reports whether an answer is written without LaTeX delimiters
// and is more than a bare number.
func plainText(answer string) bool {
	if strings.ContainsAny(answer, "$") || strings.Contains(answer, `\boxed`) {
		return false
	}
	x := strings.TrimSuffix(strings.TrimPrefix(answer, "The answer is "), ".")
	return !mvNumberRe.MatchString(x)
}

var mvNumberRe = regexp.MustCompile(`^-?\d+(?:\.\d+)?$`)

// mvSubset takes up to mvSubsetPerCell pairs of each (benchmark, category),
// evenly spaced over the cell, in order.
func mvSubset(all []mvPair) []mvPair {
	cells := map[[2]string][]mvPair{}
	var keys [][2]string
	for _, p := range all {
		k := [2]string{p.Bench, p.Cat}
		if cells[k] == nil {
			keys = append(keys, k)
		}
		cells[k] = append(cells[k], p)
	}
	var out []mvPair
	for _, k := range keys {
		c := cells[k]
		n := min(len(c), mvSubsetPerCell)
		for i := range n {
			out = append(out, c[i*len(c)/n])
		}
	}
	return out
}

// mvPairs generates the pairs from the benchmark references: each distinct
// reference (the first benchmark that has it names it) with its variants;
// a pair is kept once.
func mvPairs(t *testing.T) []mvPair {
	t.Helper()
	var out []mvPair
	seenGold := map[string]bool{}
	seenPair := map[[2]string]bool{}
	for _, bench := range mvBenchmarks {
		probs, _, err := dataset.LoadShared(bench)
		if err != nil {
			t.Fatal(err)
		}
		var golds []string
		for _, p := range probs {
			if g := strings.TrimSpace(p.Answer); !seenGold[g] {
				seenGold[g] = true
				golds = append(golds, g)
			}
		}
		for i, g := range golds {
			other := golds[(i+1)%len(golds)]
			for _, v := range variants(g, other) {
				k := [2]string{g, v.answer}
				if seenPair[k] {
					continue
				}
				seenPair[k] = true
				out = append(out, mvPair{Bench: bench, Cat: v.cat, Gold: g, Answer: v.answer, Same: v.same})
			}
		}
	}
	return out
}

type variant struct {
	cat    string
	answer string
	same   bool
}

var (
	mvIntRe       = regexp.MustCompile(`^-?\d+$`)
	mvThousandsRe = regexp.MustCompile(`^-?\d{1,3}(?:,\d{3})+$`)
	mvDecRe       = regexp.MustCompile(`^-?\d*\.\d+$`)
	mvFracRe      = regexp.MustCompile(`^(-?)\\[dt]?frac\{(\d+)\}\{(\d+)\}$`)
	mvAnyFracRe   = regexp.MustCompile(`\\[dt]?frac\{([^{}]+)\}\{([^{}]+)\}`)
	mvAtomRe      = regexp.MustCompile(`^(?:\d+|[a-zA-Z]|\\[a-zA-Z]+)$`)
	mvMixedRe     = regexp.MustCompile(`^(-?)(\d+)\s*\\[dt]?frac\{(\d+)\}\{(\d+)\}$`)
	mvSciRe       = regexp.MustCompile(`^(-?\d+(?:\.\d+)?)\s*\\(?:times|cdot)\s*10\^\{?(-?\d+)\}?$`)
	mvUnitRe      = regexp.MustCompile(`^(-?\d+(?:\.\d+)?)\s*(?:\\[,;!]|~|\\ )*\s*\\(?:mathrm|text|mbox)\{\s*~?\s*([a-zA-Z ]+)\}$`)
	mvTextRe      = regexp.MustCompile(`^\\text\{\s*([A-Za-z][A-Za-z ]*[A-Za-z])\s*\}$`)
	mvPctRe       = regexp.MustCompile(`^(-?\d+(?:\.\d+)?)\s*\\%$`)
	mvSqrtRe      = regexp.MustCompile(`\\sqrt\{(\d)\}`)
	mvPiRe        = regexp.MustCompile(`^(\d*)\\pi$`)
	mvBracketed   = regexp.MustCompile(`^([(\[])([^()\[\]{}]*,[^()\[\]{}]*)([)\]])$`)
	mvSetRe       = regexp.MustCompile(`^\\\{([^{}]*,[^{}]*)\\\}$`)
	mvListRe      = regexp.MustCompile(`^[^(){}\[\]\\=]*,[^(){}\[\]\\=]*$`)
)

// The three ways a model states a final answer.
func boxed(x string) string   { return `So the final answer is $\boxed{` + x + `}$.` }
func dollars(x string) string { return `The final answer is $` + x + `$.` }
func plain(x string) string   { return `The answer is ` + x + `.` }

// stated writes x the way a model states it, chosen deterministically from
// x: in \boxed{} (most often, as prompted), in $...$ after "the final answer
// is", or as plain text when x has no LaTeX.
func stated(x string) string {
	h := fnv.New32a()
	h.Write([]byte(x))
	switch k := h.Sum32() % 4; {
	case k == 3 && !strings.ContainsAny(x, `\{}^_$`):
		return plain(x)
	case k == 2 && !strings.Contains(x, "$"):
		return dollars(x)
	}
	return boxed(x)
}

// variants returns model-style answers to the reference g: rewritings meant
// equal and different answers meant not equal; other is another reference
// of the same benchmark.
func variants(g, other string) []variant {
	var out []variant
	add := func(cat, ans string, same bool) { out = append(out, variant{cat, ans, same}) }
	eq := func(cat, x string) { add(cat, stated(x), true) }
	ne := func(cat, x string) { add(cat, stated(x), false) }

	add("self", boxed(g), true)
	if !strings.Contains(g, "$") {
		add("self", dollars(g), true)
	}
	if !strings.ContainsAny(g, `\{}`) {
		add("self", g, true)
	}
	if other != g {
		ne("other reference", other)
	}

	plainNum := g
	if mvThousandsRe.MatchString(g) {
		plainNum = strings.ReplaceAll(g, ",", "")
	}
	switch {
	case mvIntRe.MatchString(plainNum):
		n, _ := new(big.Int).SetString(plainNum, 10)
		eq("number forms", n.String()+".0")
		if s := verify.WithThousands(n.String()); s != n.String() {
			eq("number forms", s)
		}
		eq("number forms", `\frac{`+new(big.Int).Mul(n, big.NewInt(2)).String()+`}{2}`)
		eq("units", n.String()+`\text{ cm}`)
		eq("units", `\$`+n.String())
		eq("units", n.String()+` \mathrm{~m}^2`)
		eq("percent", n.String()+`\%`)
		eq("equation", `x = `+n.String())
		ne("wrong number", new(big.Int).Add(n, big.NewInt(1)).String())
		if n.Sign() != 0 {
			ne("wrong number", new(big.Int).Neg(n).String())
			ne("wrong number", new(big.Int).Mul(n, big.NewInt(10)).String())
		}
		if len(n.String()) >= 5 {
			f, _ := new(big.Float).SetInt(n).Float64()
			eq("scientific notation", strconv.FormatFloat(f, 'e', -1, 64))
			m, e := sciParts(n.String())
			eq("scientific notation", m+` \times 10^{`+e+`}`)
		}
	case mvDecRe.MatchString(g):
		r, _ := new(big.Rat).SetString(g)
		eq("decimal vs fraction", verify.FracLaTeX(r))
		if !r.IsInt() {
			eq("frac vs slash", slashFrac(r))
		}
		eq("number forms", g+"0")
		eq("units", g+`\text{ m}`)
		ne("wrong number", new(big.Rat).Add(r, big.NewRat(1, 10)).FloatString(decimals(g)))
	case mvFracRe.MatchString(g):
		m := mvFracRe.FindStringSubmatch(g)
		r, _ := new(big.Rat).SetString(m[1] + m[2] + "/" + m[3])
		eq("frac vs slash", slashFrac(r))
		if d := decimalOf(r, 6); strings.Contains(d, ".") {
			eq("decimal vs fraction", d)
		} else {
			ne("decimal vs fraction", d) // rounds to an integer
		}
		if len(m[2]) == 1 && len(m[3]) == 1 {
			eq("latex spacing", m[1]+`\frac`+m[2]+m[3])
		}
		eq("latex spacing", m[1]+`\dfrac{`+m[2]+`}{`+m[3]+`}`)
		if m[2] != m[3] {
			ne("wrong number", m[1]+`\frac{`+m[3]+`}{`+m[2]+`}`)
		}
		ne("wrong number", decimalOf(r, 2))
	case mvSciRe.MatchString(g):
		m := mvSciRe.FindStringSubmatch(g)
		r, _ := new(big.Rat).SetString(m[1] + "e" + m[2])
		eq("scientific notation", m[1]+"e"+m[2])
		eq("scientific notation", m[1]+` \cdot 10^{`+m[2]+`}`)
		if f, _ := r.Float64(); f != 0 {
			eq("scientific notation", strconv.FormatFloat(f, 'f', -1, 64))
		}
		ne("wrong number", m[1]+` \times 10^{`+inc(m[2])+`}`)
	case mvUnitRe.MatchString(g):
		m := mvUnitRe.FindStringSubmatch(g)
		eq("units", m[1])
		eq("units", m[1]+` \text{ `+strings.TrimSpace(m[2])+`}`)
		r, _ := new(big.Rat).SetString(m[1])
		ne("wrong number", new(big.Rat).Add(r, big.NewRat(1, 1)).FloatString(decimals(m[1])))
	case mvPctRe.MatchString(g):
		m := mvPctRe.FindStringSubmatch(g)
		eq("percent", m[1])
		r, _ := new(big.Rat).SetString(m[1])
		eq("percent", decimalOf(new(big.Rat).Quo(r, big.NewRat(100, 1)), 8))
		eq("percent", m[1]+"%")
		ne("wrong number", new(big.Rat).Add(r, big.NewRat(1, 1)).FloatString(decimals(m[1]))+`\%`)
	case mvTextRe.MatchString(g):
		w := mvTextRe.FindStringSubmatch(g)[1]
		eq("text", `\textbf{`+w+`}`)
		eq("text", `\text{ `+w+` }`)
		if !strings.Contains(w, " ") {
			eq("text", w)
		}
	case mvBracketed.MatchString(g):
		m := mvBracketed.FindStringSubmatch(g)
		items := splitTrim(m[2])
		eq("intervals and tuples", m[1]+strings.Join(items, ", ")+m[3])
		eq("latex spacing", `\left`+m[1]+" "+strings.Join(items, `,\ `)+` \right`+m[3])
		flip := map[string]string{"(": "[", "[": "(", ")": "]", "]": ")"}
		ne("intervals and tuples", flip[m[1]]+m[2]+m[3])
		if len(items) >= 2 && items[0] != items[len(items)-1] {
			rev := slices.Clone(items)
			slices.Reverse(rev)
			ne("intervals and tuples", m[1]+strings.Join(rev, ",")+m[3])
		}
	case mvSetRe.MatchString(g):
		items := splitTrim(mvSetRe.FindStringSubmatch(g)[1])
		rev := slices.Clone(items)
		slices.Reverse(rev)
		eq("sets and lists", `\{`+strings.Join(rev, ", ")+`\}`)
		eq("latex spacing", `\left\{ `+strings.Join(items, `,\, `)+` \right\}`)
		ne("sets and lists", `\{`+strings.Join(items[1:], ", ")+`\}`)
	case mvListRe.MatchString(g):
		items := splitTrim(g)
		rev := slices.Clone(items)
		slices.Reverse(rev)
		eq("sets and lists", strings.Join(rev, ", "))
		ne("sets and lists", strings.Join(items[1:], ", "))
	}

	// A mixed number, as MATH writes them ("11 \frac{2}{3}" inches), is
	// written by models as an improper fraction or a decimal.
	if m := mvMixedRe.FindStringSubmatch(g); m != nil {
		r, _ := new(big.Rat).SetString(m[2] + "/1")
		r.Add(r, mustRat(m[3]+"/"+m[4]))
		if m[1] == "-" {
			r.Neg(r)
		}
		eq("mixed number", verify.FracLaTeX(r))
		eq("mixed number", decimalOf(r, 6))
		ne("mixed number", verify.FracLaTeX(new(big.Rat).Mul(mustRat(m[1]+m[2]+"/1"), mustRat(m[3]+"/"+m[4]))))
	}

	// Rewritings that apply inside any LaTeX answer.
	if strings.Contains(g, `\frac`) && !mvFracRe.MatchString(g) && !mvMixedRe.MatchString(g) && !mixedInside.MatchString(g) && !strings.Contains(g, ",\\!") {
		if s := mvAnyFracRe.ReplaceAllStringFunc(g, func(f string) string {
			m := mvAnyFracRe.FindStringSubmatch(f)
			if f == g {
				return paren(m[1]) + "/" + paren(m[2])
			}
			// Inside a larger expression a model writes (a/b), as
			// "1/4 n" would read as 1/(4n).
			return "(" + paren(m[1]) + "/" + paren(m[2]) + ")"
		}); s != g {
			eq("frac vs slash", s)
		}
		eq("latex spacing", strings.ReplaceAll(g, `\frac`, `\dfrac`))
	}
	if mvSqrtRe.MatchString(g) {
		eq("latex spacing", mvSqrtRe.ReplaceAllString(g, `\sqrt$1`))
	}
	if m := mvPiRe.FindStringSubmatch(g); m != nil {
		k := 1.0
		if m[1] != "" {
			k, _ = strconv.ParseFloat(m[1], 64)
		}
		eq("irrational as decimal", strconv.FormatFloat(k*3.141592653589793, 'f', 6, 64))
		ne("irrational as decimal", strconv.FormatFloat(k*3.14, 'f', 2, 64))
	}
	if strings.Contains(g, `\`) && !strings.Contains(g, "$") {
		eq("latex spacing", `\displaystyle `+spaceAfterNonLetter.ReplaceAllString(g, "$1  "))
		if strings.Contains(g, "(") && !strings.Contains(g, `\left`) {
			eq("latex spacing", strings.ReplaceAll(strings.ReplaceAll(g, "(", `\left(`), ")", `\right)`))
		}
	}
	return out
}

// mixedInside finds a mixed number inside a longer answer, where turning
// the fraction into a/b would change the meaning.
var mixedInside = regexp.MustCompile(`\d\s*\\[dt]?frac`)

func mustRat(s string) *big.Rat {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		panic("bad rational " + s)
	}
	return r
}

// spaceAfterNonLetter finds a space that does not end a command name, so
// that doubling it keeps "\text {cm}" a command with its argument.
var spaceAfterNonLetter = regexp.MustCompile(`([^a-zA-Z]) `)

func splitTrim(s string) []string {
	parts := strings.Split(s, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// paren wraps a numerator or denominator that is not a single token.
func paren(s string) string {
	if mvAtomRe.MatchString(s) {
		return s
	}
	return "(" + s + ")"
}

// sciParts writes an integer's digits as mantissa and exponent: "12500" →
// "1.25", "4".
func sciParts(digits string) (string, string) {
	sign := ""
	if strings.HasPrefix(digits, "-") {
		sign, digits = "-", digits[1:]
	}
	frac := strings.TrimRight(digits[1:], "0")
	m := digits[:1]
	if frac != "" {
		m += "." + frac
	}
	return sign + m, strconv.Itoa(len(digits) - 1)
}

func inc(e string) string {
	n, _ := strconv.Atoi(e)
	return strconv.Itoa(n + 1)
}

func decimals(s string) int {
	if _, f, ok := strings.Cut(s, "."); ok {
		return len(f)
	}
	return 0
}

func slashFrac(r *big.Rat) string { return r.Num().String() + "/" + r.Denom().String() }

// decimalOf writes r exactly when its decimal expansion ends, else to sig
// significant digits.
func decimalOf(r *big.Rat, sig int) string {
	if s, exact := r.FloatPrec(); exact {
		return r.FloatString(s)
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', sig, 64)
}
