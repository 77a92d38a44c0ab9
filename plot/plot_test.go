package plot

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"image"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/plot/vg"

	"github.com/hacrl/hacrl/metrics"
)

var agents = []string{"Qwen2.5-0.5B", "Llama-3.2-1B", "Qwen3-0.6B"}

// writeRun writes a synthetic metrics file of three agents learning at
// different speeds, evaluated every 10 steps, with run-wide timing records.
func writeRun(t *testing.T, dir string) {
	t.Helper()
	w, err := metrics.Open(dir, metrics.Fresh, metrics.WithTensorBoard(false))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for step := range 60 {
		for i, a := range agents {
			rate := 0.03 * float64(i+1)
			acc := 0.8 * (1 - math.Exp(-rate*float64(step)))
			v := map[string]float64{
				"reward/mean":              acc + 0.05*rng.NormFloat64(),
				"accuracy/train":           acc,
				"loss/policy":              -0.1*acc + 0.01*rng.NormFloat64(),
				"clip/self_frac":           0.02 + 0.01*rng.Float64(),
				"omega/" + agents[(i+1)%3]: 0.5 + 0.1*float64(i),
			}
			if step%10 == 0 {
				v["eval/test/greedy_acc"] = acc * 0.9
			}
			if i == 2 && step == 30 {
				v["reward/mean"] = math.NaN() // left out of the curve
			}
			if err := w.Write(metrics.Record{Step: step, Agent: a, Time: 1, Values: v}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Write(metrics.Record{Step: step, Time: 1, Values: map[string]float64{"time/step_s": 2 + rng.Float64()}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// checkPNG decodes a PNG, checks its size and that it is not blank.
func checkPNG(t *testing.T, path string, w, h int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Errorf("%s: size %dx%d, want %dx%d", path, b.Dx(), b.Dy(), w, h)
	}
	if n := coloredPixels(img); n < 500 {
		t.Errorf("%s: only %d colored pixels; the figure looks blank", path, n)
	}
}

// coloredPixels counts pixels that are neither gray nor white: curve pixels.
func coloredPixels(img image.Image) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if max(r, g, bl)-min(r, g, bl) > 0x2000 {
				n++
			}
		}
	}
	return n
}

// checkSVG parses an SVG as XML and checks that it holds each label.
func checkSVG(t *testing.T, path string, labels ...string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(data))
	var text strings.Builder
	root := ""
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("%s: not well-formed XML: %v", path, err)
			}
			break
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
		case xml.CharData:
			text.Write(tok)
		}
	}
	if root != "svg" {
		t.Errorf("%s: root element %q, want svg", path, root)
	}
	for _, l := range labels {
		if !strings.Contains(text.String(), l) {
			t.Errorf("%s: text lacks %q", path, l)
		}
	}
}

func TestLearningCurvesPerKey(t *testing.T) {
	dir := t.TempDir()
	writeRun(t, dir)
	paths, err := LearningCurves(context.Background(), dir, Options{Metrics: []string{"reward/*", "eval/*"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"eval_test_greedy_acc.png", "eval_test_greedy_acc.svg", "reward_mean.png", "reward_mean.svg"}
	var got []string
	for _, p := range paths {
		if filepath.Dir(p) != filepath.Join(dir, "plots") {
			t.Errorf("%s is not in OUT/plots", p)
		}
		got = append(got, filepath.Base(p))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("wrote %v, want %v", got, want)
	}
	w, h := px(FigureWidth), px(FigureHeight)
	for _, p := range paths {
		if strings.HasSuffix(p, ".png") {
			checkPNG(t, p, w+legendPixels(t, p, w), h)
		} else {
			checkSVG(t, p, append([]string{"step"}, agents...)...)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "plots"))
	if len(entries) != 4 {
		t.Errorf("plots/ holds %d entries, want 4 (no temporary files)", len(entries))
	}
}

// legendPixels returns how much wider than the axes area a PNG is: the
// legend column, which depends on the label widths.
func legendPixels(t *testing.T, path string, w int) int {
	t.Helper()
	f, _ := os.Open(path)
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	extra := cfg.Width - w
	if extra < 60 || extra > 400 {
		t.Errorf("%s: legend column %d px wide, want 60..400", path, extra)
	}
	return extra
}

func TestLearningCurvesGrid(t *testing.T) {
	dir := t.TempDir()
	writeRun(t, dir)
	dest := filepath.Join(t.TempDir(), "figs")
	paths, err := LearningCurves(context.Background(), dir, Options{Grid: true, Formats: []string{"png", "svg", "pdf"}, Dest: dest})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 3 || filepath.Base(paths[0]) != "grid.png" {
		t.Fatalf("wrote %v, want grid.png, grid.svg, grid.pdf", paths)
	}
	// DefaultGrid selects 8 of the run's keys (omega/* matches 3): 3 columns × 3 rows.
	w, h := px(3*TileWidth), px(3*TileHeight)
	checkPNG(t, paths[0], w+legendPixels(t, paths[0], w), h)
	checkSVG(t, paths[1], "accuracy/train", "clip/self_frac", "eval/test/greedy_acc", "reward/mean", "omega/Qwen3-0.6B", agents[0])
	if data, _ := os.ReadFile(paths[2]); !bytes.HasPrefix(data, []byte("%PDF-")) {
		t.Errorf("%s is not a PDF", paths[2])
	}
}

func TestLearningCurvesErrors(t *testing.T) {
	empty := t.TempDir()
	os.WriteFile(filepath.Join(empty, metrics.FileName), nil, 0o644)
	withData := t.TempDir()
	writeRun(t, withData)
	tests := []struct {
		name string
		dir  string
		opts Options
		want string
	}{
		{"missing file", t.TempDir(), Options{}, "no such file"},
		{"empty file", empty, Options{}, "holds no metric records"},
		{"no match", withData, Options{Metrics: []string{"nope/*"}}, `no metric key matches ["nope/*"]; the keys are accuracy/train`},
		{"bad format", withData, Options{Metrics: []string{"entropy", "reward/mean"}, Formats: []string{"bmp"}}, `unsupported figure format ".bmp"`},
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := LearningCurves(canceled, withData, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled context: error = %v, want context.Canceled", err)
	}
	for _, tc := range tests {
		_, err := LearningCurves(context.Background(), tc.dir, tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error = %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestCurves(t *testing.T) {
	dir := t.TempDir()
	var series []Series
	for i, m := range []string{"HACPO", "GSPO (independent)", "GRPO"} {
		s := Series{Label: m}
		for x := range 50 {
			s.X = append(s.X, float64(x))
			s.Y = append(s.Y, math.Log1p(float64(x)*float64(3-i)))
		}
		series = append(series, s)
	}
	path := filepath.Join(dir, "methods.svg")
	if err := Curves(series, "Qwen2.5-0.5B on arith", "step", "test accuracy", path); err != nil {
		t.Fatal(err)
	}
	checkSVG(t, path, "HACPO", "GSPO (independent)", "GRPO", "Qwen2.5-0.5B on arith", "test accuracy")
	png := filepath.Join(dir, "methods.png")
	if err := Curves(series, "methods", "step", "acc", png); err != nil {
		t.Fatal(err)
	}
	w := px(FigureWidth)
	checkPNG(t, png, w+legendPixels(t, png, w), px(FigureHeight))

	bad := []struct {
		series []Series
		want   string
	}{
		{nil, "no finite data points"},
		{[]Series{{Label: "nan", X: []float64{1}, Y: []float64{math.NaN()}}}, "no finite data points"},
		{[]Series{{Label: "ragged", X: []float64{1, 2}, Y: []float64{1}}}, `series "ragged" has 2 x values but 1 y values`},
	}
	for _, tc := range bad {
		out := filepath.Join(dir, "bad.png")
		err := Curves(tc.series, "t", "x", "y", out)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), out) {
			t.Errorf("Curves error = %v, want %q naming the file", err, tc.want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Error("a failed Curves left a file behind")
		}
	}
}

func TestSelectKeysAndFileNames(t *testing.T) {
	keys := []string{"eval/gsm8k/greedy_acc", "eval/test/greedy_acc", "omega/a", "reward/mean", "reward_mean"}
	got, err := selectKeys(keys, []string{"eval/*/greedy_acc", "omega/?"})
	if err != nil || !slices.Equal(got, []string{"eval/gsm8k/greedy_acc", "eval/test/greedy_acc", "omega/a"}) {
		t.Errorf("selectKeys = %v (%v)", got, err)
	}
	if got, _ := selectKeys(keys, []string{"eval*"}); len(got) != 2 {
		t.Errorf("'eval*' selected %v, want both eval keys ('*' crosses '/')", got)
	}
	if got, _ := selectKeys(keys, []string{"reward.mean"}); len(got) != 0 {
		t.Errorf("'.' is literal, but 'reward.mean' selected %v", got)
	}
	names := FileNames([]string{"reward/mean", "reward_mean", "a b:c", "../x"})
	if want := []string{"reward_mean", "reward_mean-2", "a_b_c", "_x"}; !slices.Equal(names, want) {
		t.Errorf("FileNames = %v, want %v", names, want)
	}
}

// px converts a length to PNG pixels.
func px(l vg.Length) int { return int(math.Round(float64(l/vg.Inch) * DPI)) }

// TestLearningCurvesTornLastLine draws a run whose metrics file ends in part
// of a record (a crash in the middle of a write): the whole records are drawn
// and the torn line is reported on Warn.
func TestLearningCurvesTornLastLine(t *testing.T) {
	dir := t.TempDir()
	writeRun(t, dir)
	f, err := os.OpenFile(filepath.Join(dir, metrics.FileName), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"step":61,"agent":"a","accuracy/tr`)
	f.Close()
	var warn strings.Builder
	paths, err := LearningCurves(context.Background(), dir, Options{Metrics: []string{"accuracy/train"}, Formats: []string{"svg"}, Warn: &warn})
	if err != nil || len(paths) != 1 {
		t.Fatalf("LearningCurves over a torn file: %v, %v", paths, err)
	}
	if !strings.Contains(warn.String(), metrics.FileName+":") || !strings.Contains(warn.String(), "it is skipped") {
		t.Errorf("warning %q does not report the torn line", warn.String())
	}
}

// Grids of different selections go to different files: the default grid
// to grid.png, --metrics 'eval/*' to grid-eval_all.png, so neither
// overwrites the other; drawing the same selection again replaces its
// files and says so.
func TestGridsNeverShareAFile(t *testing.T) {
	dir := t.TempDir()
	writeRun(t, dir)
	draw := func(metrics ...string) ([]string, string) {
		t.Helper()
		var warn bytes.Buffer
		paths, err := LearningCurves(context.Background(), dir, Options{Grid: true, Metrics: metrics, Formats: []string{"svg"}, Warn: &warn})
		if err != nil {
			t.Fatal(err)
		}
		return paths, warn.String()
	}
	def, _ := draw()
	evals, warn := draw("eval/*")
	if want := filepath.Join(dir, "plots", "grid-eval_all.svg"); len(evals) != 1 || evals[0] != want {
		t.Fatalf("--metrics 'eval/*' wrote %v, want %s", evals, want)
	}
	if warn != "" {
		t.Errorf("a new selection's grid warned %q", warn)
	}
	checkSVG(t, def[0], "accuracy/train", "reward/mean")
	checkSVG(t, evals[0], "eval/test/greedy_acc")
	if data, _ := os.ReadFile(evals[0]); strings.Contains(string(data), "reward/mean") {
		t.Errorf("the eval grid holds reward/mean")
	}
	if _, warn := draw("eval/*"); !strings.Contains(warn, "plot: 1 of the 1 files replaced the same figures drawn earlier in "+filepath.Join(dir, "plots")) {
		t.Errorf("redrawing the same grid warned %q", warn)
	}
	for _, tt := range []struct {
		patterns []string
		want     string
	}{
		{nil, "grid"},
		{[]string{"eval/*"}, "grid-eval_all"},
		{[]string{"eval/*/greedy_acc", "omega/?"}, "grid-eval_all_greedy_acc+omega_any"},
		{[]string{"reward/mean"}, "grid-reward_mean"},
	} {
		if got := GridName(tt.patterns); got != tt.want {
			t.Errorf("GridName(%q) = %q, want %q", tt.patterns, got, tt.want)
		}
	}
	long := []string{strings.Repeat("a", 100)}
	other := []string{strings.Repeat("a", 99) + "b"}
	if a, b := GridName(long), GridName(other); len(a) > 5+maxGridName || a == b {
		t.Errorf("long selections: %q and %q, want distinct names of at most %d bytes", a, b, 5+maxGridName)
	}
}
