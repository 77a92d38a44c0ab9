package plot

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"gonum.org/v1/plot/plotter"

	"github.com/hacrl/hacrl/metrics"
)

// DefaultGrid are the patterns of the keys of the default grid figure: the
// headline training and evaluation curves of a HACPO run.
var DefaultGrid = []string{
	"reward/mean", "accuracy/train", "eval/*/greedy_acc", "capability", "omega/*",
	"loss/policy", "*clip*", "length/mean", "entropy", "grad_norm",
}

// Options selects what LearningCurves draws.
type Options struct {
	// Metrics are glob patterns over metric keys, where '*' matches any run
	// of characters, '/' included, and '?' any one character. Empty selects
	// every key, or DefaultGrid when Grid is set.
	Metrics []string
	// Grid draws all selected keys as tiles of one figure instead of one
	// figure per key: named "grid" for DefaultGrid, else after the
	// patterns (GridName).
	Grid bool
	// Formats are the file extensions to write, without the dot; default
	// png and svg.
	Formats []string
	// Dest is the directory of the figures; default OUT/plots.
	Dest string
	// Warn, when not nil, is told what of the metrics file was skipped: a
	// torn last line (metrics.TornError).
	Warn io.Writer
}

// runWideLabel is the legend label of records without an agent.
const runWideLabel = "run"

// LearningCurves reads runDir/metrics.jsonl and draws the selected metric keys
// with one line per agent (x = step), writing one figure per key named after
// the key ('/' and other characters unsafe in file names become '_'), or one
// grid figure named after the selection (GridName). Figures of different
// keys or selections thus never share a file; drawing the same again
// replaces the earlier figure with the newer records, which Warn is told.
// It returns the paths written, and stops between figures when ctx is done.
func LearningCurves(ctx context.Context, runDir string, opts Options) ([]string, error) {
	src := filepath.Join(runDir, metrics.FileName)
	recs, err := metrics.ReadFile(src)
	if torn := metrics.Torn(err); torn != nil {
		if opts.Warn != nil {
			fmt.Fprintf(opts.Warn, "plot: %v\n", torn)
		}
	} else if err != nil {
		return nil, fmt.Errorf("plot: %w", err)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("plot: %s holds no metric records", src)
	}
	patterns := opts.Metrics
	if len(patterns) == 0 && opts.Grid {
		patterns = DefaultGrid
	}
	keys, err := selectKeys(metrics.Keys(recs), patterns)
	if err != nil {
		return nil, fmt.Errorf("plot: %s: %w", src, err)
	}
	formats := opts.Formats
	if len(formats) == 0 {
		formats = []string{"png", "svg"}
	}
	dest := opts.Dest
	if dest == "" {
		dest = filepath.Join(runDir, "plots")
	}
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return nil, fmt.Errorf("plot: %w", err)
	}
	agents := metrics.Agents(recs)
	var written []string
	replaced := 0
	defer func() {
		if replaced > 0 && opts.Warn != nil {
			fmt.Fprintf(opts.Warn, "plot: %d of the %d files replaced the same figures drawn earlier in %s\n", replaced, len(written), dest)
		}
	}()
	exists := func(path string) {
		if _, err := os.Stat(path); err == nil {
			replaced++
		}
	}
	if opts.Grid {
		name := GridName(opts.Metrics)
		for _, f := range formats {
			if err := ctx.Err(); err != nil {
				return written, fmt.Errorf("plot: %w", err)
			}
			path := filepath.Join(dest, name+"."+f)
			exists(path)
			if err := drawGrid(recs, agents, keys, path); err != nil {
				return written, err
			}
			written = append(written, path)
		}
		return written, nil
	}
	names := FileNames(keys)
	for i, key := range keys {
		series := agentSeries(recs, agents, key)
		for _, f := range formats {
			if err := ctx.Err(); err != nil {
				return written, fmt.Errorf("plot: %w", err)
			}
			path := filepath.Join(dest, names[i]+"."+f)
			exists(path)
			if err := Curves(series, key, "step", key, path); err != nil {
				return written, err
			}
			written = append(written, path)
		}
	}
	return written, nil
}

// drawGrid draws each key as a tile, with one legend of all agents.
func drawGrid(recs []metrics.Record, agents, keys []string, path string) error {
	cols := min(3, len(keys))
	if len(keys) == 4 {
		cols = 2
	}
	var panels []*panelPlot
	for _, key := range keys {
		panel, err := newPanel(agentSeries(recs, agents, key), key, "step", "")
		if err != nil {
			return fmt.Errorf("plot: %s: %s: %w", path, key, err)
		}
		panels = append(panels, panel)
	}
	legend := newLegend()
	for i, a := range agents {
		if hasAny(recs, a, keys) {
			legend.Add(agentLabel(a), &plotter.Line{LineStyle: lineStyle(i)})
		}
	}
	if err := render(path, TileWidth, TileHeight, panels, cols, &legend); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return nil
}

// hasAny reports whether agent has a value of any of keys.
func hasAny(recs []metrics.Record, agent string, keys []string) bool {
	for _, r := range recs {
		if r.Agent != agent {
			continue
		}
		for _, k := range keys {
			if _, ok := r.Values[k]; ok {
				return true
			}
		}
	}
	return false
}

func agentLabel(agent string) string {
	if agent == "" {
		return runWideLabel
	}
	return agent
}

// agentSeries returns, for every agent in order, the key's values by step.
// An agent without the key gets an empty series, which keeps each agent's
// color the same across figures.
func agentSeries(recs []metrics.Record, agents []string, key string) []Series {
	series := make([]Series, len(agents))
	index := map[string]int{}
	for i, a := range agents {
		series[i].Label = agentLabel(a)
		index[a] = i
	}
	for _, r := range recs {
		v, ok := r.Values[key]
		if !ok || math.IsNaN(v) {
			continue
		}
		s := &series[index[r.Agent]]
		s.X = append(s.X, float64(r.Step))
		s.Y = append(s.Y, v)
	}
	for i := range series {
		sortByX(&series[i])
	}
	return series
}

// sortByX orders a series' points by x, keeping the file order of equal x.
func sortByX(s *Series) {
	idx := make([]int, len(s.X))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case s.X[a] < s.X[b]:
			return -1
		case s.X[a] > s.X[b]:
			return 1
		}
		return 0
	})
	x, y := make([]float64, len(idx)), make([]float64, len(idx))
	for i, j := range idx {
		x[i], y[i] = s.X[j], s.Y[j]
	}
	s.X, s.Y = x, y
}

// selectKeys returns the keys matching any pattern (all keys when there are
// no patterns), in sorted order.
func selectKeys(keys, patterns []string) ([]string, error) {
	if len(keys) == 0 {
		return nil, errors.New("no metric keys")
	}
	if len(patterns) == 0 {
		return keys, nil
	}
	res := make([]*regexp.Regexp, len(patterns))
	for i, p := range patterns {
		res[i] = globRegexp(p)
	}
	var out []string
	for _, k := range keys {
		if slices.ContainsFunc(res, func(re *regexp.Regexp) bool { return re.MatchString(k) }) {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no metric key matches %q; the keys are %s", patterns, strings.Join(keys, ", "))
	}
	return out, nil
}

// globRegexp compiles a glob where '*' matches any characters, '/' included,
// and '?' matches one character; everything else is literal.
func globRegexp(pattern string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for _, r := range pattern {
		switch r {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// GridName is the file name (without extension) of the grid figure of
// the metric patterns: "grid" for none (DefaultGrid), else "grid-" and the
// patterns joined by '+', with '*' written "all", '?' "any" and every
// other character unsafe in file names '_' ("grid-eval_all" for
// 'eval/*'); a long selection is shortened and given a hash of the whole.
func GridName(patterns []string) string {
	if len(patterns) == 0 {
		return "grid"
	}
	var b strings.Builder
	for i, p := range patterns {
		if i > 0 {
			b.WriteByte('+')
		}
		for _, c := range []byte(p) {
			switch {
			case c == '*':
				b.WriteString("all")
			case c == '?':
				b.WriteString("any")
			case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_':
				b.WriteByte(c)
			default:
				b.WriteByte('_')
			}
		}
	}
	name := b.String()
	if len(name) > maxGridName {
		h := fnv.New32a()
		h.Write([]byte(strings.Join(patterns, "\x00")))
		name = fmt.Sprintf("%s-%08x", name[:maxGridName-9], h.Sum32())
	}
	return "grid-" + name
}

// maxGridName bounds the selection part of a grid's file name.
const maxGridName = 80

// FileNames returns a file name (without extension) for each key: '/' and
// every character outside [A-Za-z0-9._-] become '_', and names that would
// collide get a numeric suffix.
func FileNames(keys []string) []string {
	names := make([]string, len(keys))
	used := map[string]bool{}
	for i, k := range keys {
		b := []byte(k)
		for j, c := range b {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
				b[j] = '_'
			}
		}
		name := strings.TrimLeft(string(b), ".")
		if name == "" {
			name = "metric"
		}
		base := name
		for n := 2; used[name]; n++ {
			name = fmt.Sprintf("%s-%d", base, n)
		}
		used[name] = true
		names[i] = name
	}
	return names
}
