package experiment

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/hacpo"
	"github.com/hacrl/hacrl/internal/atomicfile"
	"github.com/hacrl/hacrl/metrics"
	"github.com/hacrl/hacrl/plot"
)

// AgentResult is one agent's outcome in one cell.
type AgentResult struct {
	Initial map[string]float64 `json:"initial"` // eval/<set>/<metric> at step 0
	Final   map[string]float64 `json:"final"`   // at the last evaluation
	// Curve is every evaluation: step → eval/<set>/<metric>.
	Curve map[int]map[string]float64 `json:"curve"`
	// Rollout cost over the run.
	Responses int     `json:"responses"`
	Tokens    float64 `json:"generated_tokens"`
	// Means of per-step diagnostics over the run, over its first tenth of
	// steps and over its last tenth.
	Diagnostics      map[string]float64 `json:"diagnostics"`
	DiagnosticsFirst map[string]float64 `json:"diagnostics_first"`
	DiagnosticsLast  map[string]float64 `json:"diagnostics_last"`
}

// CellResult is one finished cell.
type CellResult struct {
	Cell    string                  `json:"cell"`
	Setting string                  `json:"setting"`
	Method  string                  `json:"method"`
	Seed    int64                   `json:"seed"`
	Seconds float64                 `json:"seconds"` // training + evaluation time from the metrics
	Agents  map[string]*AgentResult `json:"agents"`
}

// diagnosticKeys are averaged over steps into AgentResult.Diagnostics.
// "omega" is the mean of the learner's omega/<source> values: ω(source,
// learner), the factor on the other agents' samples in its update (Eq 10).
var diagnosticKeys = []string{"ratio/self_mean", "ratio/cross_mean", "clip/self_frac", "clip/cross_lower_frac",
	"clip/cross_upper_frac", "omega", "capability", "accuracy/train", "grad_norm", "retokenize/changed_frac", "entropy", "loss/kl"}

// Collect reads the metrics of every finished cell. A cell's metrics file
// that ends in a torn line (metrics.TornError) is read up to it, and said so
// on warn.
func Collect(c *Config, warn io.Writer) ([]CellResult, error) {
	var out []CellResult
	for _, cell := range c.Cells() {
		if !c.Done(cell) {
			continue
		}
		path, _ := cellMetrics(c.Dir(cell))
		recs, err := metrics.ReadFile(path)
		if torn := metrics.Torn(err); torn != nil {
			fmt.Fprintf(warn, "experiment: cell %s: %v\n", cell.ID(), torn)
		} else if err != nil {
			return nil, fmt.Errorf("experiment: cell %s: %w", cell.ID(), err)
		}
		cr := CellResult{Cell: cell.ID(), Setting: cell.Setting, Method: cell.Method, Seed: cell.Seed, Agents: map[string]*AgentResult{}}
		steps := map[string][]map[string]float64{} // an agent's step records, in order
		// Under dynamic sampling a step samples dynamic/sampled_prompts
		// prompts (its run-wide record says), not prompts_per_step.
		sampled := map[int]float64{}
		for _, r := range recs {
			if v, ok := r.Values["dynamic/sampled_prompts"]; ok && r.Agent == "" {
				sampled[r.Step] = v
			}
		}
		for _, r := range recs {
			if r.Agent == "" {
				cr.Seconds += r.Values["time/step"]
				continue
			}
			ar := cr.Agents[r.Agent]
			if ar == nil {
				ar = &AgentResult{Curve: map[int]map[string]float64{}}
				cr.Agents[r.Agent] = ar
			}
			evals := map[string]float64{}
			for k, v := range r.Values {
				if strings.HasPrefix(k, "eval/") {
					evals[k] = v
				}
			}
			if len(evals) > 0 {
				ar.Curve[r.Step] = evals
				if r.Step == 0 {
					ar.Initial = evals
				}
				ar.Final = evals
				cr.Seconds += r.Values["time/eval"]
				continue
			}
			// A step record: rollout cost and diagnostics.
			n := responsesPerStep(c, cell, sampled[r.Step])
			ar.Responses += n
			ar.Tokens += r.Values["length/mean"] * float64(n)
			steps[r.Agent] = append(steps[r.Agent], r.Values)
		}
		for a, ar := range cr.Agents {
			st := steps[a]
			w := max(1, len(st)/10) // a tenth of the run's steps
			ar.Diagnostics = diagnostics(st)
			ar.DiagnosticsFirst = diagnostics(st[:min(w, len(st))])
			ar.DiagnosticsLast = diagnostics(st[max(0, len(st)-w):])
		}
		out = append(out, cr)
	}
	return out, nil
}

// diagnostics averages diagnosticKeys over step records; "omega" averages
// every omega/<source> value of every record.
func diagnostics(steps []map[string]float64) map[string]float64 {
	sums, counts := map[string]float64{}, map[string]int{}
	for _, vals := range steps {
		for _, k := range diagnosticKeys {
			if v, ok := vals[k]; ok && !math.IsNaN(v) {
				sums[k] += v
				counts[k]++
			}
		}
		// In key order: with three or more agents a learner has several
		// ω's, and the sum must not depend on map order.
		for _, k := range metrics.SortedKeys(vals) {
			v := vals[k]
			if math.IsNaN(v) {
				continue
			}
			if strings.HasPrefix(k, "omega/") {
				sums["omega"] += v
				counts["omega"]++
			}
			if strings.HasPrefix(k, crossPrefix) {
				sums[k] += v
				counts[k]++
			}
		}
	}
	out := map[string]float64{}
	for k, s := range sums {
		out[k] = s / float64(counts[k])
	}
	return out
}

// responsesPerStep is how many responses an agent of the cell sampled in a
// step: prompts (prompts_per_step when 0) × responses_per_prompt × the
// method's responses multiplier.
func responsesPerStep(c *Config, cell Cell, prompts float64) int {
	m := config.Method{Name: cell.Method}
	if cell.Variant != nil {
		m = cell.Variant.Method
	}
	mult := m.ResponsesMultiplier
	if mult == 0 { // the preset's
		mult = 1
		if s, err := hacpo.Preset(m.Name); err == nil {
			mult = s.ResponsesMultiplier
		}
	}
	p := c.Run.Batch.PromptsPerStep
	if prompts > 0 {
		p = int(prompts)
	}
	return p * c.Run.Batch.ResponsesPerPrompt * mult
}

// stat is a mean ± sample std over seeds.
type stat struct {
	mean, std float64
	n         int
}

func summarize(xs []float64) stat {
	s := stat{n: len(xs)}
	if s.n == 0 {
		return s
	}
	for _, x := range xs {
		s.mean += x
	}
	s.mean /= float64(s.n)
	if s.n > 1 {
		for _, x := range xs {
			s.std += (x - s.mean) * (x - s.mean)
		}
		s.std = math.Sqrt(s.std / float64(s.n-1))
	}
	return s
}

func (s stat) String() string {
	if s.n == 0 {
		return "–"
	}
	if s.n == 1 {
		return fmt.Sprintf("%.3f", s.mean)
	}
	return fmt.Sprintf("%.3f ± %.3f", s.mean, s.std)
}

// Report writes results.json, report.md and the learning-curve figures into
// c.Out, and returns the Markdown.
func Report(ctx context.Context, c *Config, results []CellResult) (string, error) {
	data, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(c.Out, 0o755); err != nil {
		return "", fmt.Errorf("experiment: report: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(c.Out, "results.json"), append(data, '\n')); err != nil {
		return "", err
	}
	keys := evalKeys(results)
	var b strings.Builder
	fmt.Fprintf(&b, "# Experiment %s\n\n", c.Name)
	fmt.Fprintf(&b, "%d finished cells of %d; seeds %v. Each cell: %d steps of %d prompts × %d responses per agent.\n",
		len(results), len(c.Cells()), c.Seeds, c.Run.Steps, c.Run.Batch.PromptsPerStep, c.Run.Batch.ResponsesPerPrompt)
	fmt.Fprintf(&b, "Held-out accuracy at the end of training, mean ± std over seeds.\n\n")
	var total float64
	for _, r := range results {
		total += r.Seconds
	}
	fmt.Fprintf(&b, "Total training and evaluation time of the cells: %.1f min (sum over cells).\n\n", total/60)

	ablationMethods := map[string]bool{}
	if c.Ablations != nil {
		for _, v := range c.Ablations.Variants {
			ablationMethods[v.Name] = true
		}
	}
	for _, s := range c.Settings {
		fmt.Fprintf(&b, "## Setting: %s\n\n", s.Name)
		var methods []string // those with cells on this setting
		for _, m := range c.MainMethods() {
			if c.runsOn(s.Name, m) {
				methods = append(methods, m)
			}
		}
		writeTable(&b, results, s, methods, keys, true)
		if err := writeCurves(ctx, &b, c, results, s, methods, keys, ""); err != nil {
			return "", err
		}
	}
	if a := c.Ablations; a != nil {
		fmt.Fprintf(&b, "## Ablations on setting %s\n\n", a.Setting)
		var methods []string
		methods = append(methods, "hacpo")
		for _, v := range a.Variants {
			methods = append(methods, v.Name)
		}
		for _, s := range c.Settings {
			if s.Name == a.Setting {
				writeTable(&b, results, s, methods, keys, false)
				if err := writeCurves(ctx, &b, c, results, s, methods, keys, "_ablations"); err != nil {
					return "", err
				}
			}
		}
	}
	writeClaims(&b, results, c, keys)
	writeEffects(&b, results, c, keys)
	b.WriteString("## Per-step diagnostics (means over steps and seeds)\n\n")
	writeDiagnostics(&b, results)
	b.WriteString("\n## How the diagnostics move: first tenth of the steps → last tenth (means over seeds)\n\n")
	writeDiagnosticEnds(&b, results)
	writeCrossDiagnostics(&b, results)
	md := b.String()
	if err := atomicfile.WriteFile(filepath.Join(c.Out, "report.md"), []byte(md)); err != nil {
		return "", err
	}
	return md, nil
}

func evalKeys(results []CellResult) []string {
	set := map[string]bool{}
	for _, r := range results {
		for _, a := range r.Agents {
			for k := range a.Final {
				set[k] = true
			}
		}
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// writeTable writes one Table-1 block: per agent, the initial model then each
// method, with every eval key and the rollout cost.
func writeTable(b *strings.Builder, results []CellResult, s Setting, methods, keys []string, initial bool) {
	b.WriteString("| agent | method |")
	for _, k := range keys {
		b.WriteString(" " + strings.TrimPrefix(k, "eval/") + " |")
	}
	b.WriteString(" responses | generated tokens |\n|---|---|")
	for range keys {
		b.WriteString("---|")
	}
	b.WriteString("---|---|\n")
	for _, ag := range s.Agents {
		if initial {
			fmt.Fprintf(b, "| %s | initial |", ag.Name)
			for _, k := range keys {
				var xs []float64
				for _, r := range results {
					if r.Setting == s.Name {
						if a := r.Agents[ag.Name]; a != nil {
							if v, ok := a.Initial[k]; ok {
								xs = append(xs, v)
							}
						}
					}
				}
				// Every cell evaluates the same initial agent, greedy the same
				// way; the sampled metrics depend on the cell's seed: their mean.
				if len(xs) > 0 {
					fmt.Fprintf(b, " %.3f |", summarize(xs).mean)
				} else {
					b.WriteString(" – |")
				}
			}
			b.WriteString(" – | – |\n")
		}
		for _, m := range methods {
			fmt.Fprintf(b, "| %s | %s |", ag.Name, m)
			var resp, toks []float64
			vals := map[string][]float64{}
			for _, r := range results {
				if r.Setting != s.Name || r.Method != m {
					continue
				}
				a := r.Agents[ag.Name]
				if a == nil {
					continue
				}
				for _, k := range keys {
					if v, ok := a.Final[k]; ok {
						vals[k] = append(vals[k], v)
					}
				}
				resp = append(resp, float64(a.Responses))
				toks = append(toks, a.Tokens)
			}
			for _, k := range keys {
				fmt.Fprintf(b, " %s |", summarize(vals[k]))
			}
			fmt.Fprintf(b, " %s | %s |\n", intStat(resp), intStat(toks))
		}
	}
}

func intStat(xs []float64) string {
	s := summarize(xs)
	if s.n == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f", s.mean)
}

// diagnosticRows groups results by setting, method and agent, in that order,
// with each diagnostic's values over seeds as pick returns them.
func diagnosticRows(results []CellResult, pick func(*AgentResult) map[string]float64) ([]diagKey, map[diagKey]map[string][]float64) {
	vals := map[diagKey]map[string][]float64{}
	var order []diagKey
	for _, r := range results {
		for name, a := range r.Agents {
			k := diagKey{r.Setting, r.Method, name}
			if vals[k] == nil {
				vals[k] = map[string][]float64{}
				order = append(order, k)
			}
			for d, v := range pick(a) {
				vals[k][d] = append(vals[k][d], v)
			}
		}
	}
	sort.Slice(order, func(i, j int) bool {
		a, b := order[i], order[j]
		if a.setting != b.setting {
			return a.setting < b.setting
		}
		if a.method != b.method {
			return a.method < b.method
		}
		return a.agent < b.agent
	})
	return order, vals
}

type diagKey struct{ setting, method, agent string }

// writeDiagnostics writes each diagnostic's mean over the run, per setting,
// method and agent.
func writeDiagnostics(b *strings.Builder, results []CellResult) {
	order, vals := diagnosticRows(results, func(a *AgentResult) map[string]float64 { return a.Diagnostics })
	writeDiagnosticTable(b, order, diagnosticKeys, func(k diagKey, d string) string {
		if xs := vals[k][d]; len(xs) > 0 {
			return fmt.Sprintf("%.4g", summarize(xs).mean)
		}
		return "–"
	})
}

// endKeys are the diagnostics whose drift over a run tells how the agents
// interact: how likely a learner finds the others' responses (the cross
// ratio) and how many of them the clip drops, how much ω weighs them, and
// how far the learner moves from its start (entropy, KL).
var endKeys = []string{"ratio/cross_mean", "clip/cross_lower_frac", "clip/self_frac", "omega", "capability", "entropy", "loss/kl"}

// writeDiagnosticEnds writes, per setting, method and agent, each of endKeys
// over the run's first tenth of steps and over its last tenth.
func writeDiagnosticEnds(b *strings.Builder, results []CellResult) {
	order, first := diagnosticRows(results, func(a *AgentResult) map[string]float64 { return a.DiagnosticsFirst })
	_, last := diagnosticRows(results, func(a *AgentResult) map[string]float64 { return a.DiagnosticsLast })
	writeDiagnosticTable(b, order, endKeys, func(k diagKey, d string) string {
		if f, l := first[k][d], last[k][d]; len(f) > 0 && len(l) > 0 {
			return fmt.Sprintf("%.3g → %.3g", summarize(f).mean, summarize(l).mean)
		}
		return "–"
	})
}

// crossPrefix starts the cross-sample diagnostics of hacpo/doc.go decision
// 37 (cross/<name> over every source, cross/<name>/<source> per source),
// which Collect averages like diagnosticKeys.
const crossPrefix = "cross/"

// crossColumns are the cross diagnostics' columns, without crossPrefix.
var crossColumns = []string{"neg_frac", "neg_grad_frac", "ratio_p10", "ratio_p50", "ratio_p90",
	"aligned_frac", "token_ratio_p01", "token_ratio_p10", "token_ratio_p50", "token_ratio_p90", "token_ratio_p99",
	"start_ratio_p50", "anchor"}

// crossEndColumns are those whose drift the second table shows.
var crossEndColumns = []string{"neg_frac", "neg_grad_frac", "ratio_p50", "token_ratio_p10", "token_ratio_p50"}

// writeCrossDiagnostics writes, when the cells logged them, the cross
// diagnostics per setting, method, learner and source ("all": over its
// sources, when it has several): their means over the run, then first
// tenth → last tenth.
func writeCrossDiagnostics(b *strings.Builder, results []CellResult) {
	type rowKey struct {
		diagKey
		source string
	}
	var order []rowKey
	seen := map[rowKey]bool{}
	mean, first, last := map[rowKey]map[string][]float64{}, map[rowKey]map[string][]float64{}, map[rowKey]map[string][]float64{}
	add := func(dst map[rowKey]map[string][]float64, k rowKey, col string, v float64) {
		if dst[k] == nil {
			dst[k] = map[string][]float64{}
		}
		dst[k][col] = append(dst[k][col], v)
	}
	for _, r := range results {
		for agent, a := range r.Agents {
			for _, key := range metrics.SortedKeys(a.Diagnostics) {
				name, ok := strings.CutPrefix(key, crossPrefix)
				if !ok {
					continue
				}
				col, source, _ := strings.Cut(name, "/")
				if source == "" {
					source = "all"
				}
				k := rowKey{diagKey{r.Setting, r.Method, agent}, source}
				if !seen[k] {
					seen[k] = true
					order = append(order, k)
				}
				add(mean, k, col, a.Diagnostics[key])
				if v, ok := a.DiagnosticsFirst[key]; ok {
					add(first, k, col, v)
				}
				if v, ok := a.DiagnosticsLast[key]; ok {
					add(last, k, col, v)
				}
			}
		}
	}
	if len(order) == 0 {
		return
	}
	// With one source the "all" row repeats its row: leave it out.
	sources := map[diagKey]int{}
	for _, k := range order {
		if k.source != "all" {
			sources[k.diagKey]++
		}
	}
	order = slices.DeleteFunc(order, func(k rowKey) bool { return k.source == "all" && sources[k.diagKey] == 1 })
	sort.Slice(order, func(i, j int) bool {
		x, y := order[i], order[j]
		switch {
		case x.setting != y.setting:
			return x.setting < y.setting
		case x.method != y.method:
			return x.method < y.method
		case x.agent != y.agent:
			return x.agent < y.agent
		case (x.source == "all") != (y.source == "all"):
			return x.source == "all"
		}
		return x.source < y.source
	})
	table := func(cols []string, cell func(k rowKey, col string) string) {
		b.WriteString("| setting | method | learner | source |")
		for _, c := range cols {
			b.WriteString(" " + c + " |")
		}
		b.WriteString("\n|---|---|---|---|")
		for range cols {
			b.WriteString("---|")
		}
		b.WriteString("\n")
		for _, k := range order {
			fmt.Fprintf(b, "| %s | %s | %s | %s |", k.setting, k.method, k.agent, k.source)
			for _, c := range cols {
				b.WriteString(" " + cell(k, c) + " |")
			}
			b.WriteString("\n")
		}
	}
	// Per-token percentiles describe a pair only where most of its samples
	// were aligned (the same tokenizer): over a few coincidences they would
	// mislead.
	tokens := func(k rowKey, c string) bool {
		return !strings.HasPrefix(c, "token_") || summarize(mean[k]["aligned_frac"]).mean >= 0.5
	}
	b.WriteString("\n## Cross samples (hacpo/doc.go decision 37): means over steps and seeds\n\n")
	b.WriteString("Per-token percentiles are shown where at least half of the pair's samples had the source's own tokens (aligned_frac ≥ 0.5).\n\n")
	table(crossColumns, func(k rowKey, c string) string {
		if xs := mean[k][c]; len(xs) > 0 && tokens(k, c) {
			return fmt.Sprintf("%.4g", summarize(xs).mean)
		}
		return "–"
	})
	b.WriteString("\n## Cross samples: first tenth of the steps → last tenth (means over seeds)\n\n")
	table(crossEndColumns, func(k rowKey, c string) string {
		if f, l := first[k][c], last[k][c]; len(f) > 0 && len(l) > 0 && tokens(k, c) {
			return fmt.Sprintf("%.3g → %.3g", summarize(f).mean, summarize(l).mean)
		}
		return "–"
	})
}

// writeDiagnosticTable writes one row per setting, method and agent of order
// and one column per key, each cell as cell formats it.
func writeDiagnosticTable(b *strings.Builder, order []diagKey, keys []string, cell func(k diagKey, d string) string) {
	b.WriteString("| setting | method | agent |")
	for _, k := range keys {
		b.WriteString(" " + k + " |")
	}
	b.WriteString("\n|---|---|---|")
	for range keys {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, k := range order {
		fmt.Fprintf(b, "| %s | %s | %s |", k.setting, k.method, k.agent)
		for _, d := range keys {
			b.WriteString(" " + cell(k, d) + " |")
		}
		b.WriteString("\n")
	}
}

// curveMetrics are the metrics drawn against the step for every evaluation
// set: greedy accuracy, and the sampled accuracy, which moves less between
// two evaluations of the same run.
var curveMetrics = []string{"greedy_acc", "avg@4"}

// curveFile is the name of one learning-curve figure, without extension.
func curveFile(setting, agent, key, suffix string) string {
	return setting + "_" + agent + "_" + strings.NewReplacer("eval/", "", "/", "_", "@", "").Replace(key) + suffix
}

// writeCurves draws the curves of methods on setting s (files named with
// suffix) and links them from the report.
func writeCurves(ctx context.Context, b *strings.Builder, c *Config, results []CellResult, s Setting, methods, keys []string, suffix string) error {
	files, err := curves(ctx, c, results, s, methods, keys, suffix)
	if err != nil {
		return err
	}
	if len(files) > 0 {
		b.WriteString("\nLearning curves (mean over seeds, one line per method):")
		for _, f := range files {
			fmt.Fprintf(b, " [%s](plots/%s.png)", strings.TrimSuffix(strings.TrimPrefix(f, s.Name+"_"), suffix), f)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	return nil
}

// curveKeys are the eval keys curves draws: each of curveMetrics in every
// evaluation set.
func curveKeys(keys []string) []string {
	var out []string
	for _, k := range keys {
		for _, m := range curveMetrics {
			if strings.HasSuffix(k, "/"+m) {
				out = append(out, k)
			}
		}
	}
	return out
}

// curves draws, per agent of a setting and key of curveKeys, the key
// against the step, one line per method (mean over seeds), and returns the
// figures' file names (without extension) under OUT/plots.
func curves(ctx context.Context, c *Config, results []CellResult, s Setting, methods, keys []string, suffix string) ([]string, error) {
	var files []string
	for _, key := range curveKeys(keys) {
		for _, ag := range s.Agents {
			series := curveSeries(results, s.Name, ag.Name, methods, key)
			if len(series) == 0 {
				continue
			}
			dir := filepath.Join(c.Out, "plots")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
			name := curveFile(s.Name, ag.Name, key, suffix)
			for _, ext := range []string{"png", "svg"} {
				title := fmt.Sprintf("%s: %s (%s)", s.Name, ag.Name, strings.TrimPrefix(key, "eval/"))
				if err := plot.Curves(series, title, "step", strings.TrimPrefix(key, "eval/"), filepath.Join(dir, name+"."+ext)); err != nil {
					return nil, err
				}
			}
			files = append(files, name)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// curveSeries is one line per method: key at every evaluated step, the mean
// over the seeds that have it.
func curveSeries(results []CellResult, setting, agent string, methods []string, key string) []plot.Series {
	var series []plot.Series
	for _, m := range methods {
		sum := map[int]float64{}
		n := map[int]int{}
		for _, r := range results {
			if r.Setting != setting || r.Method != m || r.Agents[agent] == nil {
				continue
			}
			for step, ev := range r.Agents[agent].Curve {
				if v, ok := ev[key]; ok {
					sum[step] += v
					n[step]++
				}
			}
		}
		if len(sum) == 0 {
			continue
		}
		steps := make([]int, 0, len(sum))
		for st := range sum {
			steps = append(steps, st)
		}
		sort.Ints(steps)
		ser := plot.Series{Label: m}
		for _, st := range steps {
			ser.X = append(ser.X, float64(st))
			ser.Y = append(ser.Y, sum[st]/float64(n[st]))
		}
		series = append(series, ser)
	}
	return series
}

// A comparison is one of the paper's claims as a difference of two methods'
// final held-out accuracy for the same agent and seed ("initial": the agent
// before training).
type comparison struct{ a, b, claim string }

var claims = []comparison{
	{"hacpo", "initial", "HACPO improves every agent"},
	{"hacpo", "gspo", "HACPO beats GSPO alone"},
	{"hacpo", "gspo2x", "HACPO beats GSPO×2 with half the rollouts"},
	{"naive", "gspo", "Naive sharing hurts (negative expected)"},
	{"hacpo", "naive", "HACPO beats Naive sharing"},
}

// claims are the paper's claims, then each method variant against the
// method it varies; a variant of HACPO also meets what HACPO is claimed to
// beat, and a variant of a baseline meets HACPO (e.g. GSPO×3 as GSPO×2 for
// three agents).
func (c *Config) claims() []comparison {
	out := append([]comparison(nil), claims...)
	for _, v := range c.MethodVariants {
		base := v.Method.Name
		if v.Against != "" {
			base = v.Against
		}
		out = append(out, comparison{v.Name, base, v.Name + " against " + base})
		for _, cl := range claims {
			switch {
			case base == "hacpo" && cl.a == "hacpo":
				out = append(out, comparison{v.Name, cl.b, strings.Replace(cl.claim, "HACPO", v.Name, 1)})
			case cl.b == base && cl.a == "hacpo":
				out = append(out, comparison{cl.a, v.Name, "HACPO against " + v.Name})
			}
		}
	}
	for _, p := range c.Compare {
		if !slices.ContainsFunc(out, func(x comparison) bool { return x.a == p[0] && x.b == p[1] }) {
			out = append(out, comparison{p[0], p[1], p[0] + " against " + p[1]})
		}
	}
	return out
}

// compares reports whether methods a and b both run on some setting.
func (c *Config) compares(a, b string) bool {
	for _, s := range c.Settings {
		if c.runsOn(s.Name, a) && c.runsOn(s.Name, b) {
			return true
		}
	}
	return false
}

// pairedDiffs returns, per seed with both, final[key] of method a minus that of
// method b (or minus the initial value when b is "initial") for one agent of
// one setting, in seed order.
func pairedDiffs(results []CellResult, setting, agent, a, b, key string) (seeds []int64, d []float64) {
	byMethod := func(m string) map[int64]float64 {
		out := map[int64]float64{}
		for _, r := range results {
			ag := r.Agents[agent]
			if r.Setting != setting || ag == nil {
				continue
			}
			switch {
			case m == "initial" && r.Method == a:
				if v, ok := ag.Initial[key]; ok {
					out[r.Seed] = v
				}
			case r.Method == m:
				if v, ok := ag.Final[key]; ok {
					out[r.Seed] = v
				}
			}
		}
		return out
	}
	va, vb := byMethod(a), byMethod(b)
	for s := range va {
		if _, ok := vb[s]; ok {
			seeds = append(seeds, s)
		}
	}
	sort.Slice(seeds, func(i, j int) bool { return seeds[i] < seeds[j] })
	d = make([]float64, len(seeds))
	for i, s := range seeds {
		d[i] = va[s] - vb[s]
	}
	return seeds, d
}

// agentDiff is one agent's paired differences, in seed order.
type agentDiff struct {
	name  string // setting/agent
	diffs []float64
}

// agentDiffs is pairedDiffs for every agent of settings, and their mean per
// seed over all the agents of the settings where both methods run: each seed
// of c.Seeds that has every one of them.
func (c *Config) agentDiffs(results []CellResult, settings []Setting, a, b, key string) (per []agentDiff, all []float64) {
	sum, count := map[int64]float64{}, map[int64]int{}
	agents := 0
	for _, s := range settings {
		both := c.runsOn(s.Name, a) && c.runsOn(s.Name, b)
		for _, ag := range s.Agents {
			ss, d := pairedDiffs(results, s.Name, ag.Name, a, b, key)
			per = append(per, agentDiff{s.Name + "/" + ag.Name, d})
			if !both {
				continue
			}
			agents++
			for i, x := range d {
				sum[ss[i]] += x
				count[ss[i]]++
			}
		}
	}
	for _, seed := range c.Seeds {
		if agents > 0 && count[seed] == agents {
			all = append(all, sum[seed]/float64(agents))
		}
	}
	return per, all
}

// diffCell formats paired differences as mean ± std over seeds and how many
// seeds came out positive.
func diffCell(d []float64) string {
	if len(d) == 0 {
		return "–"
	}
	pos := 0
	for _, x := range d {
		if x > 0 {
			pos++
		}
	}
	s := summarize(d)
	if math.Abs(s.mean) < 5e-4 {
		s.mean = 0 // no "-0.000"
	}
	return fmt.Sprintf("%+.3f ± %.3f (%d/%d)", s.mean, s.std, pos, s.n)
}

// writeClaims writes the paper's claims as paired differences per agent and
// key, and the same averaged per seed over all agents of the settings where
// both run; then, for the ablation setting, each variant minus full HACPO.
func writeClaims(b *strings.Builder, results []CellResult, c *Config, keys []string) {
	b.WriteString("## The paper's claims, paired by seed\n\n")
	b.WriteString("Each entry: final accuracy of the first method minus the second for the same agent and seed, ")
	b.WriteString("mean ± std over seeds, and (seeds with a positive difference / seeds). ")
	b.WriteString("\"all agents\" averages the difference over every agent of every setting where both methods run, within a seed first.\n\n")
	for _, k := range keys {
		fmt.Fprintf(b, "### %s\n\n| claim | comparison |", strings.TrimPrefix(k, "eval/"))
		for _, s := range c.Settings {
			for _, ag := range s.Agents {
				fmt.Fprintf(b, " %s/%s |", s.Name, ag.Name)
			}
		}
		b.WriteString(" all agents |\n|---|---|")
		for _, s := range c.Settings {
			for range s.Agents {
				b.WriteString("---|")
			}
		}
		b.WriteString("---|\n")
		for _, cl := range c.claims() {
			if !c.compares(cl.a, cl.b) {
				continue // a claim about methods this grid does not run
			}
			fmt.Fprintf(b, "| %s | %s − %s |", cl.claim, cl.a, cl.b)
			per, all := c.agentDiffs(results, c.Settings, cl.a, cl.b, k)
			for _, d := range per {
				fmt.Fprintf(b, " %s |", diffCell(d.diffs))
			}
			fmt.Fprintf(b, " %s |\n", diffCell(all))
		}
		b.WriteString("\n")
	}
	a := c.Ablations
	if a == nil {
		return
	}
	for _, s := range c.Settings {
		if s.Name != a.Setting {
			continue
		}
		fmt.Fprintf(b, "### Ablations on %s: variant − full HACPO\n\n| variant | key |", s.Name)
		for _, ag := range s.Agents {
			fmt.Fprintf(b, " %s |", ag.Name)
		}
		b.WriteString("\n|---|---|")
		for range s.Agents {
			b.WriteString("---|")
		}
		b.WriteString("\n")
		for _, v := range a.Variants {
			for _, k := range keys {
				fmt.Fprintf(b, "| %s | %s |", v.Name, strings.TrimPrefix(k, "eval/"))
				for _, ag := range s.Agents {
					_, d := pairedDiffs(results, s.Name, ag.Name, v.Name, "hacpo", k)
					fmt.Fprintf(b, " %s |", diffCell(d))
				}
				b.WriteString("\n")
			}
		}
		b.WriteString("\n")
	}
}

// t975 are Student's t quantiles at 0.975 for 1 to 30 degrees of freedom.
var t975 = [...]float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
	2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
	2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}

// tQuantile975 is Student's t quantile at 0.975 for df degrees of freedom:
// the table up to 30, then the Cornish–Fisher expansion around the normal
// quantile (within 1e-4 there).
func tQuantile975(df int) float64 {
	if df <= len(t975) {
		return t975[df-1]
	}
	const z = 1.959964
	n := float64(df)
	return z + (z*z*z+z)/(4*n) + (5*z*z*z*z*z+16*z*z*z+3*z)/(96*n*n)
}

// ci95 is the 95% confidence interval of the mean of paired differences d
// (Student's t, seeds as the sample); ok is false with fewer than two.
func ci95(d []float64) (lo, hi float64, ok bool) {
	s := summarize(d)
	if s.n < 2 {
		return 0, 0, false
	}
	h := tQuantile975(s.n-1) * s.std / math.Sqrt(float64(s.n))
	return s.mean - h, s.mean + h, true
}

// ciCell formats paired differences as mean [95% CI] (seeds).
func ciCell(d []float64) string {
	lo, hi, ok := ci95(d)
	if !ok {
		return "–"
	}
	return fmt.Sprintf("%+.3f [%+.3f, %+.3f] (%d)", summarize(d).mean, lo, hi, len(d))
}

// writeEffects writes, per comparison and key, the 95% confidence interval
// of the paired difference averaged over all agents, and the agents whose own
// interval lies above or below zero: which effects the seeds resolve.
func writeEffects(b *strings.Builder, results []CellResult, c *Config, keys []string) {
	b.WriteString("## Effect sizes: 95% confidence intervals over seeds\n\n")
	b.WriteString("Each comparison's paired difference (as in the claims tables) as mean [95% confidence interval] ")
	b.WriteString("(seeds), with Student's t over seeds; \"all agents\" averages within a seed first. ")
	b.WriteString("\"per setting\" is the same over each setting's agents, where the comparison spans several settings. ")
	b.WriteString("The last two columns name the agents whose own interval lies wholly above or below zero.\n\n")
	b.WriteString("| comparison | key | all agents | per setting | above 0 | below 0 |\n|---|---|---|---|---|---|\n")
	type pair struct {
		a, b     string
		settings []Setting
	}
	var pairs []pair
	for _, cl := range c.claims() {
		if c.compares(cl.a, cl.b) {
			pairs = append(pairs, pair{cl.a, cl.b, c.Settings})
		}
	}
	if a := c.Ablations; a != nil {
		for _, s := range c.Settings {
			if s.Name == a.Setting {
				for _, v := range a.Variants {
					pairs = append(pairs, pair{v.Name, "hacpo", []Setting{s}})
				}
			}
		}
	}
	for _, p := range pairs {
		for _, k := range keys {
			per, all := c.agentDiffs(results, p.settings, p.a, p.b, k)
			var above, below []string
			for _, d := range per {
				if lo, hi, ok := ci95(d.diffs); ok && lo > 0 {
					above = append(above, d.name)
				} else if ok && hi < 0 {
					below = append(below, d.name)
				}
			}
			var perSetting []string
			for _, s := range p.settings {
				if c.runsOn(s.Name, p.a) && c.runsOn(s.Name, p.b) {
					_, all := c.agentDiffs(results, []Setting{s}, p.a, p.b, k)
					perSetting = append(perSetting, s.Name+" "+ciCell(all))
				}
			}
			if len(perSetting) < 2 {
				perSetting = nil // the same as all agents
			}
			fmt.Fprintf(b, "| %s − %s | %s | %s | %s | %s | %s |\n", p.a, p.b, strings.TrimPrefix(k, "eval/"), ciCell(all),
				strings.Join(perSetting, "; "), strings.Join(above, ", "), strings.Join(below, ", "))
		}
	}
	b.WriteString("\n")
}
