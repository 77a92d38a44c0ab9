package experiment

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/metrics"
)

// cellFor builds a finished cell with one agent's initial and final value of key.
func cellFor(setting, method string, seed int64, agent string, initial, final float64) CellResult {
	const key = "eval/test/greedy_acc"
	return CellResult{Setting: setting, Method: method, Seed: seed, Agents: map[string]*AgentResult{
		agent: {Initial: map[string]float64{key: initial}, Final: map[string]float64{key: final}},
	}}
}

func TestPairedDiffs(t *testing.T) {
	results := []CellResult{
		cellFor("size", "hacpo", 1, "small", 0.2, 0.30),
		cellFor("size", "hacpo", 2, "small", 0.2, 0.25),
		cellFor("size", "hacpo", 3, "small", 0.2, 0.10),
		cellFor("size", "gspo", 1, "small", 0.2, 0.20),
		cellFor("size", "gspo", 3, "small", 0.2, 0.15),  // seed 2 missing: not paired
		cellFor("state", "gspo", 1, "small", 0.2, 0.90), // other setting: ignored
	}
	for _, tc := range []struct {
		a, b      string
		wantSeeds []int64
		want      []float64
	}{
		{"hacpo", "gspo", []int64{1, 3}, []float64{0.10, -0.05}},
		{"hacpo", "initial", []int64{1, 2, 3}, []float64{0.10, 0.05, -0.10}},
		{"gspo", "hacpo", []int64{1, 3}, []float64{-0.10, 0.05}},
		{"naive", "gspo", nil, nil},
	} {
		seeds, d := pairedDiffs(results, "size", "small", tc.a, tc.b, "eval/test/greedy_acc")
		if !slices.Equal(seeds, tc.wantSeeds) || len(d) != len(tc.want) {
			t.Errorf("%s − %s: seeds %v diffs %v, want %v %v", tc.a, tc.b, seeds, d, tc.wantSeeds, tc.want)
			continue
		}
		for i := range d {
			if math.Abs(d[i]-tc.want[i]) > 1e-12 {
				t.Errorf("%s − %s: diff %d = %v, want %v", tc.a, tc.b, i, d[i], tc.want[i])
			}
		}
	}
}

func TestDiffCell(t *testing.T) {
	for _, tc := range []struct {
		d    []float64
		want string
	}{
		{nil, "–"},
		{[]float64{0.1}, "+0.100 ± 0.000 (1/1)"},
		{[]float64{0.1, -0.1, 0.3}, "+0.100 ± 0.200 (2/3)"},
		{[]float64{-0.02, -0.04}, "-0.030 ± 0.014 (0/2)"},
	} {
		if got := diffCell(tc.d); got != tc.want {
			t.Errorf("diffCell(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestWriteClaimsAveragesOnlyComplete(t *testing.T) {
	c := &Config{Seeds: []int64{1, 2}, Settings: []Setting{
		{Name: "size", Agents: []config.Agent{{Name: "small"}, {Name: "large"}}},
	}}
	results := []CellResult{
		cellFor("size", "hacpo", 1, "small", 0.2, 0.3),
		cellFor("size", "hacpo", 1, "large", 0.4, 0.5),
		cellFor("size", "hacpo", 2, "small", 0.2, 0.1), // seed 2 lacks "large": left out of "all agents"
	}
	var b strings.Builder
	writeClaims(&b, results, c, []string{"eval/test/greedy_acc"})
	md := b.String()
	line := ""
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(l, "| HACPO improves every agent |") {
			line = l
		}
	}
	// small: +0.1 (seed 1), −0.1 (seed 2); large: +0.1; all agents: seed 1 only, +0.1.
	want := "| HACPO improves every agent | hacpo − initial | +0.000 ± 0.141 (1/2) | +0.100 ± 0.000 (1/1) | +0.100 ± 0.000 (1/1) |"
	if line != want {
		t.Errorf("claims row:\n got %s\nwant %s\n%s", line, want, md)
	}
}

// Method variants run on every setting after the methods, and the claims
// compare each with the method it varies (a HACPO variant also with what
// HACPO is claimed to beat).
func TestMethodVariants(t *testing.T) {
	c := &Config{Seeds: []int64{1, 2}, Methods: []string{"gspo", "hacpo"},
		MethodVariants: []Variant{{Name: "hacpo-original", Method: config.Method{Name: "hacpo", Semantics: "original"}}},
		Settings:       []Setting{{Name: "a"}, {Name: "b"}}}
	var ids []string
	for _, cell := range c.Cells() {
		ids = append(ids, cell.ID())
	}
	want := []string{"a/gspo/seed1", "a/gspo/seed2", "a/hacpo/seed1", "a/hacpo/seed2", "a/hacpo-original/seed1", "a/hacpo-original/seed2",
		"b/gspo/seed1", "b/gspo/seed2", "b/hacpo/seed1", "b/hacpo/seed2", "b/hacpo-original/seed1", "b/hacpo-original/seed2"}
	if !slices.Equal(ids, want) {
		t.Errorf("cells %v\nwant %v", ids, want)
	}
	if got := c.MainMethods(); !slices.Equal(got, []string{"gspo", "hacpo", "hacpo-original"}) {
		t.Errorf("MainMethods = %v", got)
	}
	var got []string
	for _, cl := range c.claims()[len(claims):] {
		got = append(got, cl.a+"−"+cl.b)
	}
	if want := []string{"hacpo-original−hacpo", "hacpo-original−initial", "hacpo-original−gspo", "hacpo-original−gspo2x", "hacpo-original−naive"}; !slices.Equal(got, want) {
		t.Errorf("variant claims %v, want %v", got, want)
	}
	c.MethodVariants = append(c.MethodVariants, Variant{Name: "gspo"})
	if err := c.validate(); err == nil || !strings.Contains(err.Error(), `method_variants[1].name: "gspo"`) {
		t.Errorf("a variant named like a method: %v", err)
	}
}

func TestCI95(t *testing.T) {
	for _, tc := range []struct {
		d      []float64
		lo, hi float64
		ok     bool
	}{
		{nil, 0, 0, false},
		{[]float64{0.1}, 0, 0, false},
		{[]float64{0.1, 0.2, 0.3}, 0.2 - 4.303*0.1/math.Sqrt(3), 0.2 + 4.303*0.1/math.Sqrt(3), true},
		{[]float64{0.02, 0.02, 0.02, 0.02, 0.02}, 0.02, 0.02, true}, // no spread: the interval is the point
	} {
		lo, hi, ok := ci95(tc.d)
		if ok != tc.ok || math.Abs(lo-tc.lo) > 1e-9 || math.Abs(hi-tc.hi) > 1e-9 {
			t.Errorf("ci95(%v) = [%v, %v] %v, want [%v, %v] %v", tc.d, lo, hi, ok, tc.lo, tc.hi, tc.ok)
		}
	}
	// Past the table, the expansion meets the exact quantiles (R's qt(0.975, df)).
	for df, want := range map[int]float64{31: 2.039513, 40: 2.021075, 60: 2.000298, 120: 1.979930} {
		if got := tQuantile975(df); math.Abs(got-want) > 2e-4 {
			t.Errorf("tQuantile975(%d) = %.6f, want %.6f", df, got, want)
		}
	}
}

func TestWriteEffects(t *testing.T) {
	c := &Config{Seeds: []int64{1, 2, 3}, Settings: []Setting{
		{Name: "size", Agents: []config.Agent{{Name: "small"}, {Name: "large"}}},
	}}
	var results []CellResult
	for seed, gain := range map[int64][2]float64{1: {0.10, -0.10}, 2: {0.12, -0.08}, 3: {0.08, 0.05}} {
		results = append(results,
			cellFor("size", "hacpo", seed, "small", 0.2, 0.2+gain[0]),
			cellFor("size", "hacpo", seed, "large", 0.4, 0.4+gain[1]))
	}
	var b strings.Builder
	writeEffects(&b, results, c, []string{"eval/test/greedy_acc"})
	row := ""
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(l, "| hacpo − initial |") {
			row = l
		}
	}
	// small: +0.10 ± 0.02, wholly above 0; large: −0.043 ± 0.084, unresolved.
	// All agents per seed: 0, +0.02, +0.065.
	lo, hi, _ := ci95([]float64{0, 0.02, 0.065})
	want := fmt.Sprintf("| hacpo − initial | test/greedy_acc | +0.028 [%+.3f, %+.3f] (3) |  | size/small |  |", lo, hi)
	if row != want {
		t.Errorf("effects row:\n got %s\nwant %s\n%s", row, want, b.String())
	}
}

// With several settings the effects table gives each setting's own interval
// beside the one over all agents.
func TestWriteEffectsPerSetting(t *testing.T) {
	c := &Config{Seeds: []int64{1, 2, 3}, Settings: []Setting{
		{Name: "size", Agents: []config.Agent{{Name: "small"}}},
		{Name: "state", Agents: []config.Agent{{Name: "weak"}}},
	}}
	var results []CellResult
	for seed, gain := range map[int64][2]float64{1: {0.10, -0.10}, 2: {0.12, -0.08}, 3: {0.08, -0.06}} {
		results = append(results,
			cellFor("size", "hacpo", seed, "small", 0.2, 0.2+gain[0]),
			cellFor("state", "hacpo", seed, "weak", 0.4, 0.4+gain[1]))
	}
	var b strings.Builder
	writeEffects(&b, results, c, []string{"eval/test/greedy_acc"})
	var row string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(l, "| hacpo − initial |") {
			row = l
		}
	}
	size, state := ciCell([]float64{0.10, 0.12, 0.08}), ciCell([]float64{-0.10, -0.08, -0.06})
	if !strings.Contains(row, "| size "+size+"; state "+state+" | size/small | state/weak |") {
		t.Errorf("effects row lacks the per-setting intervals %s and %s:\n%s", size, state, row)
	}
}

// A method variant restricted to some settings runs only there, meets HACPO
// when it varies a baseline, and its "all agents" averages only the agents of
// those settings.
func TestVariantOnSomeSettings(t *testing.T) {
	c := &Config{Seeds: []int64{1, 2}, Methods: []string{"gspo2x", "hacpo"},
		MethodVariants: []Variant{{Name: "gspo3x", Method: config.Method{Name: "gspo2x", ResponsesMultiplier: 3}, Settings: []string{"three"}}},
		Settings: []Setting{
			{Name: "pair", Agents: []config.Agent{{Name: "a"}, {Name: "b"}}},
			{Name: "three", Agents: []config.Agent{{Name: "a"}, {Name: "b"}, {Name: "c"}}},
		}}
	c.Run.Batch.PromptsPerStep, c.Run.Batch.ResponsesPerPrompt = 4, 2
	var ids []string
	for _, cell := range c.Cells() {
		ids = append(ids, cell.ID())
		if cell.Method == "gspo3x" {
			if n := responsesPerStep(c, cell, 0); n != 24 {
				t.Errorf("%s: %d responses per step, want 4 × 2 × 3", cell.ID(), n)
			}
			// A step of dynamic sampling that sampled 3 rounds of 4 prompts.
			if n := responsesPerStep(c, cell, 12); n != 72 {
				t.Errorf("%s: %d responses in a step that sampled 12 prompts, want 12 × 2 × 3", cell.ID(), n)
			}
		}
	}
	if want := []string{"pair/gspo2x/seed1", "pair/gspo2x/seed2", "pair/hacpo/seed1", "pair/hacpo/seed2",
		"three/gspo2x/seed1", "three/gspo2x/seed2", "three/hacpo/seed1", "three/hacpo/seed2", "three/gspo3x/seed1", "three/gspo3x/seed2"}; !slices.Equal(ids, want) {
		t.Errorf("cells %v\nwant %v", ids, want)
	}
	var got []string
	for _, cl := range c.claims()[len(claims):] {
		got = append(got, cl.a+"−"+cl.b)
	}
	if want := []string{"gspo3x−gspo2x", "hacpo−gspo3x"}; !slices.Equal(got, want) {
		t.Errorf("variant claims %v, want %v", got, want)
	}
	var results []CellResult
	for _, seed := range c.Seeds {
		for _, s := range c.Settings {
			for _, ag := range s.Agents {
				results = append(results, cellFor(s.Name, "hacpo", seed, ag.Name, 0.2, 0.5))
				if s.Name == "three" {
					results = append(results, cellFor(s.Name, "gspo3x", seed, ag.Name, 0.2, 0.4))
				}
			}
		}
	}
	// hacpo − gspo3x is +0.1 for each of three's agents; pair has no gspo3x
	// and does not count.
	per, all := c.agentDiffs(results, c.Settings, "hacpo", "gspo3x", "eval/test/greedy_acc")
	if len(per) != 5 || len(per[0].diffs) != 0 || len(per[2].diffs) != 2 || len(all) != 2 || math.Abs(all[0]-0.1) > 1e-12 {
		t.Errorf("agentDiffs: per %+v, all %v; want three's agents at +0.1 and all agents +0.1 in both seeds", per, all)
	}
	md, err := Report(context.Background(), &Config{Out: t.TempDir(), Seeds: c.Seeds, Methods: c.Methods, MethodVariants: c.MethodVariants,
		Settings: c.Settings, Run: c.Run}, results)
	if err != nil {
		t.Fatal(err)
	}
	// Agent a is in both settings: its gspo3x row only in three's table.
	if strings.Count(md, "| a | gspo3x |") != 1 || !strings.Contains(md, "| c | gspo3x |") {
		t.Errorf("gspo3x rows: want them in three's table only:\n%s", md)
	}
	c.MethodVariants[0].Settings = []string{"four"}
	if err := c.validate(); err == nil || !strings.Contains(err.Error(), `method_variants[0].settings: "four" is not one of the settings`) {
		t.Errorf("a variant on an unknown setting: %v", err)
	}
}

// A learner's ω diagnostic sums its omega/<source> values in key order, so
// results.json is the same bytes every time (with three or more agents the
// float sum depends on the order).
func TestCollectOmegaInKeyOrder(t *testing.T) {
	c := &Config{Out: t.TempDir(), Seeds: []int64{1}, Methods: []string{"hacpo"},
		Settings: []Setting{{Name: "three", Agents: []config.Agent{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}}}}}
	cell := c.Cells()[0]
	if err := os.MkdirAll(c.Dir(cell), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(c.Dir(cell), "done.json"), []byte("{}\n"), 0o644)
	b, cc, d := 0.1, 0.2, 0.3
	recs := []metrics.Record{{Step: 1, Agent: "a", Time: 1, Values: map[string]float64{"omega/b": b, "omega/c": cc, "omega/d": d}}}
	if err := metrics.WriteFile(filepath.Join(c.Dir(cell), metrics.FileName), recs); err != nil {
		t.Fatal(err)
	}
	want := (b + cc + d) / 3 // in key order; b + (cc + d) differs in the last bit
	for range 30 {
		res, err := Collect(c, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if got := res[0].Agents["a"].Diagnostics["omega"]; got != want {
			t.Fatalf("omega = %.17g, want %.17g (the sum in key order)", got, want)
		}
	}
}

// The first and last tenth of a run's steps average separately from the
// whole run: a drift the run's mean hides (the cross ratio rising from 0.1 to
// 0.7, say) shows as first → last.
func TestCollectFirstAndLastTenth(t *testing.T) {
	var recs []metrics.Record
	for step := 1; step <= 25; step++ { // a tenth of 25 steps is 2
		recs = append(recs, metrics.Record{Step: step, Agent: "a", Time: 1,
			Values: map[string]float64{"ratio/cross_mean": float64(step), "omega/b": 1}})
	}
	c := oneCellGrid(t, []config.Agent{{Name: "a"}}, recs)
	res, err := Collect(c, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	a := res[0].Agents["a"]
	for _, tc := range []struct {
		name string
		got  map[string]float64
		want float64
	}{
		{"run", a.Diagnostics, 13}, {"first tenth", a.DiagnosticsFirst, 1.5}, {"last tenth", a.DiagnosticsLast, 24.5},
	} {
		if tc.got["ratio/cross_mean"] != tc.want || tc.got["omega"] != 1 {
			t.Errorf("%s: cross ratio %v, ω %v; want %v, 1", tc.name, tc.got["ratio/cross_mean"], tc.got["omega"], tc.want)
		}
	}
	var b strings.Builder
	writeDiagnosticEnds(&b, res)
	if !strings.Contains(b.String(), "| s | hacpo | a | 1.5 → 24.5 |") {
		t.Errorf("the first → last table lacks the cross ratio's drift:\n%s", b.String())
	}
}

// A method variant's against names what the report compares it with; it
// must be another method or variant of the grid.
func TestVariantAgainst(t *testing.T) {
	c := &Config{Methods: []string{"grpo", "hacpo"}, MethodVariants: []Variant{
		{Name: "dapo", Method: config.Method{Name: "dapo"}, Against: "grpo"},
		{Name: "hacpo-tm", Method: config.Method{Name: "hacpo"}},
	}}
	var got []string
	for _, cl := range c.claims()[len(claims):] {
		if strings.Contains(cl.claim, " against ") {
			got = append(got, cl.claim)
		}
	}
	if want := []string{"dapo against grpo", "hacpo-tm against hacpo"}; !slices.Equal(got, want) {
		t.Errorf("claims %v, want %v", got, want)
	}
	// The report leaves out the claims about methods the grid does not run.
	c.Settings = []Setting{{Name: "a"}}
	if !c.compares("dapo", "grpo") || !c.compares("hacpo", "initial") || c.compares("hacpo", "gspo") {
		t.Errorf("compares: dapo−grpo %v, hacpo−initial %v, hacpo−gspo %v; want true, true, false",
			c.compares("dapo", "grpo"), c.compares("hacpo", "initial"), c.compares("hacpo", "gspo"))
	}
	for _, against := range []string{"ppo", "dapo"} {
		c := &Config{Seeds: []int64{1}, Methods: []string{"grpo"}, Settings: []Setting{{Name: "a"}},
			MethodVariants: []Variant{{Name: "dapo", Method: config.Method{Name: "dapo"}, Against: against}}}
		want := `method_variants[0].against: "` + against + `" is not another method or variant of the grid`
		if err := c.validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("against %s: %v", against, err)
		}
	}
}

// The cross diagnostics are averaged per key, over every source and per
// source, and tabled with the "all" row first; a grid without them gets no
// such section.
func TestCrossDiagnosticsSection(t *testing.T) {
	var recs []metrics.Record
	for step := 1; step <= 20; step++ {
		recs = append(recs, metrics.Record{Step: step, Agent: "a", Time: 1, Values: map[string]float64{
			"cross/neg_frac": float64(step), "cross/neg_frac/b": 2 * float64(step), "cross/neg_frac/c": 0.5,
			"cross/ratio_p50/b": 0.25, "cross/aligned_frac/b": 1, "cross/token_ratio_p50/b": 0.75,
			"cross/aligned_frac/c": 0.001, "cross/token_ratio_p50/c": 9}})
	}
	c := oneCellGrid(t, []config.Agent{{Name: "a"}, {Name: "b"}, {Name: "c"}}, recs)
	res, err := Collect(c, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if d := res[0].Agents["a"].Diagnostics; d["cross/neg_frac"] != 10.5 || d["cross/neg_frac/b"] != 21 || d["cross/ratio_p50/b"] != 0.25 {
		t.Errorf("cross diagnostics averaged to %v", d)
	}
	var b strings.Builder
	writeCrossDiagnostics(&b, res)
	out := b.String()
	for _, want := range []string{
		"| s | hacpo | a | all | 10.5 | – |",
		"| s | hacpo | a | b | 21 | – | – | 0.25 |",
		"| s | hacpo | a | c | 0.5 |",
		"| 0.75 |",
		"| s | hacpo | a | all | 1.5 → 19.5 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the cross section lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "| 9 |") {
		t.Errorf("token percentiles of a pair with 0.001 of its samples aligned are shown:\n%s", out)
	}
	if strings.Index(out, "| a | all |") > strings.Index(out, "| a | b |") {
		t.Errorf("the all row is not first:\n%s", out)
	}
	// One source: no "all" row.
	for _, d := range []map[string]float64{res[0].Agents["a"].Diagnostics, res[0].Agents["a"].DiagnosticsFirst, res[0].Agents["a"].DiagnosticsLast} {
		for k := range d {
			if strings.HasSuffix(k, "/c") {
				delete(d, k)
			}
		}
	}
	b.Reset()
	writeCrossDiagnostics(&b, res)
	if strings.Contains(b.String(), "| all |") || !strings.Contains(b.String(), "| s | hacpo | a | b | 21 |") {
		t.Errorf("with one source the section has an all row or lacks the source's:\n%s", b.String())
	}
	b.Reset()
	res[0].Agents["a"].Diagnostics = map[string]float64{"omega": 1}
	writeCrossDiagnostics(&b, res)
	if b.Len() != 0 {
		t.Errorf("a grid without cross diagnostics got a section:\n%s", b.String())
	}
}

// compare adds comparisons the variants do not get by default, once each,
// and names pairs that are not the grid's.
func TestCompare(t *testing.T) {
	c := &Config{Name: "g", Out: "o", Seeds: []int64{1}, Parallel: 1, Methods: []string{"gspo", "hacpo"},
		MethodVariants: []Variant{{Name: "gspo3x", Method: config.Method{Name: "gspo2x"}}, {Name: "hacpo-capable", Method: config.Method{Name: "hacpo"}}},
		Settings:       []Setting{{Name: "a"}},
		Compare:        [][]string{{"hacpo-capable", "gspo3x"}, {"hacpo-capable", "hacpo"}}}
	var got []string
	for _, cl := range c.claims() {
		got = append(got, cl.a+"−"+cl.b)
	}
	n := 0
	for _, g := range got {
		if g == "hacpo-capable−hacpo" {
			n++
		}
	}
	if !slices.Contains(got, "hacpo-capable−gspo3x") || n != 1 {
		t.Errorf("claims %v: want hacpo-capable−gspo3x added and hacpo-capable−hacpo once", got)
	}
	c.Compare = [][]string{{"hacpo-capable", "naive"}, {"gspo"}}
	if err := c.validate(); err == nil || !strings.Contains(err.Error(), `compare[0]: "hacpo-capable" against "naive"`) {
		t.Errorf("a comparison with a method not in the grid: %v", err)
	}
	if err := c.validate(); err == nil || !strings.Contains(err.Error(), "compare[1]: want a pair [a, b], got 1 names") {
		t.Errorf("a comparison of one name: %v", err)
	}
}

// oneCellGrid is a grid of one HACPO cell (setting s, seed 1) whose agents
// are agents, finished, with metrics recs.
func oneCellGrid(t *testing.T, agents []config.Agent, recs []metrics.Record) *Config {
	t.Helper()
	c := &Config{Name: "g", Out: t.TempDir(), Seeds: []int64{1}, Methods: []string{"hacpo"},
		Settings: []Setting{{Name: "s", Agents: agents}}}
	c.Run.Batch.PromptsPerStep, c.Run.Batch.ResponsesPerPrompt = 2, 2
	dir := c.Dir(c.Cells()[0])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "done.json"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := metrics.WriteFile(filepath.Join(dir, metrics.FileName), recs); err != nil {
		t.Fatal(err)
	}
	return c
}
