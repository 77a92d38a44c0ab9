// Package plot draws learning curves from a run's metrics as PNG, SVG or PDF
// figures with gonum.org/v1/plot.
//
// LearningCurves reads OUT/metrics.jsonl and draws one figure per metric key,
// or one grid of several keys, with one line per agent against the step.
// Curves draws arbitrary labeled series on one figure, for comparing runs or
// methods in reports. Legends sit to the right of the axes so they never hide
// a curve, and every file is written atomically.
package plot

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"strings"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgpdf"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/hacrl/hacrl/internal/atomicfile"
)

// DPI is the resolution of PNG figures.
const DPI = 120

// Figure sizes: a single plot, and one tile of a grid.
const (
	FigureWidth  = 9 * vg.Inch
	FigureHeight = 5 * vg.Inch
	TileWidth    = 4.5 * vg.Inch
	TileHeight   = 3.2 * vg.Inch
)

// Series is one labeled curve.
type Series struct {
	Label string
	X, Y  []float64
}

// palette holds distinguishable line colors (Tableau 10); after ten series
// the colors repeat with a dashed line.
var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff}, {0xd6, 0x27, 0x28, 0xff},
	{0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff}, {0xe3, 0x77, 0xc2, 0xff}, {0x7f, 0x7f, 0x7f, 0xff},
	{0xbc, 0xbd, 0x22, 0xff}, {0x17, 0xbe, 0xcf, 0xff},
}

// lineStyle returns the style of the i-th series.
func lineStyle(i int) draw.LineStyle {
	sty := draw.LineStyle{Color: palette[i%len(palette)], Width: vg.Points(1.6)}
	if i >= len(palette) {
		sty.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
	}
	return sty
}

// Curves draws the series on one figure, one line each with its label in the
// legend, and writes it to path in the format of its extension (.png, .svg or
// .pdf). Points whose X or Y is NaN or infinite are left out.
func Curves(series []Series, title, xlabel, ylabel, path string) error {
	panel, err := newPanel(series, title, xlabel, ylabel)
	if err != nil {
		return fmt.Errorf("plot: %s: %w", path, err)
	}
	if err := render(path, FigureWidth, FigureHeight, []*panelPlot{panel}, 1, panel.legend); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return nil
}

// panelPlot is one set of axes and the legend entries of its lines.
type panelPlot struct {
	plot   *gplot.Plot
	legend *gplot.Legend
}

// newPanel builds the axes of one figure or grid tile.
func newPanel(series []Series, title, xlabel, ylabel string) (*panelPlot, error) {
	p := gplot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(13)
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.X.Tick.Marker = trimmedTicks{}
	p.Y.Tick.Marker = trimmedTicks{}
	p.Add(plotter.NewGrid())
	legend := newLegend()
	points := 0
	for i, s := range series {
		xys, err := finitePoints(s)
		if err != nil {
			return nil, err
		}
		if len(xys) == 0 {
			continue
		}
		points += len(xys)
		line, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("series %q: %w", s.Label, err)
		}
		line.LineStyle = lineStyle(i)
		p.Add(line)
		thumbs := []gplot.Thumbnailer{line}
		if len(xys) <= 40 { // sparse curves (evaluations) show their points
			sc, err := plotter.NewScatter(xys)
			if err != nil {
				return nil, fmt.Errorf("series %q: %w", s.Label, err)
			}
			sc.GlyphStyle = draw.GlyphStyle{Color: line.Color, Radius: vg.Points(2.2), Shape: draw.CircleGlyph{}}
			p.Add(sc)
			thumbs = append(thumbs, sc)
		}
		legend.Add(s.Label, thumbs...)
	}
	if points == 0 {
		return nil, errors.New("no finite data points to plot")
	}
	return &panelPlot{plot: p, legend: &legend}, nil
}

// newLegend returns an empty legend for the column right of the axes.
func newLegend() gplot.Legend {
	legend := gplot.NewLegend()
	legend.Top, legend.Left = true, true
	legend.TextStyle.Font.Size = vg.Points(11)
	legend.Padding = vg.Points(3)
	return legend
}

// trimmedTicks are gonum's default ticks with trailing zeros dropped from
// the labels ("25.00" → "25", "0.50" → "0.5").
type trimmedTicks struct{}

func (trimmedTicks) Ticks(min, max float64) []gplot.Tick {
	ticks := gplot.DefaultTicks{}.Ticks(min, max)
	for i, t := range ticks {
		if strings.Contains(t.Label, ".") && !strings.ContainsAny(t.Label, "eE") {
			ticks[i].Label = strings.TrimSuffix(strings.TrimRight(t.Label, "0"), ".")
		}
	}
	return ticks
}

// finitePoints returns the points of s with finite coordinates.
func finitePoints(s Series) (plotter.XYs, error) {
	if len(s.X) != len(s.Y) {
		return nil, fmt.Errorf("series %q has %d x values but %d y values", s.Label, len(s.X), len(s.Y))
	}
	xys := make(plotter.XYs, 0, len(s.X))
	for i := range s.X {
		x, y := s.X[i], s.Y[i]
		if math.IsNaN(x) || math.IsInf(x, 0) || math.IsNaN(y) || math.IsInf(y, 0) {
			continue
		}
		xys = append(xys, plotter.XY{X: x, Y: y})
	}
	return xys, nil
}

// render draws the panels as a grid of cols columns, each tile w×h, with the
// legend in a column to their right, and writes the figure atomically.
func render(path string, w, h vg.Length, panels []*panelPlot, cols int, legend *gplot.Legend) error {
	rows := (len(panels) + cols - 1) / cols
	probe := draw.New(vgimg.New(vg.Inch, vg.Inch))
	legendW := legend.Rectangle(probe).Size().X + vg.Points(16)
	width, height := w*vg.Length(cols)+legendW, h*vg.Length(rows)
	canvas, err := newCanvas(path, width, height)
	if err != nil {
		return err
	}
	dc := draw.New(canvas)
	plots := draw.Crop(dc, 0, -legendW, 0, 0)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(8)}
	for i, panel := range panels {
		panel.plot.Draw(tiles.At(plots, i%cols, i/cols))
	}
	legendArea := draw.Crop(dc, width-legendW, -vg.Points(8), 0, -vg.Points(36))
	legend.Draw(legendArea)
	var buf bytes.Buffer
	if _, err := canvas.WriteTo(&buf); err != nil {
		return fmt.Errorf("%s: encode: %w", path, err)
	}
	return atomicfile.Write(path, func(w io.Writer) error {
		_, err := w.Write(buf.Bytes())
		return err
	})
}

// newCanvas returns a canvas of the format named by path's extension.
func newCanvas(path string, w, h vg.Length) (vg.CanvasWriterTo, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".png":
		return vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(DPI), vgimg.UseBackgroundColor(color.White))}, nil
	case ".svg":
		return vgsvg.New(w, h), nil
	case ".pdf":
		return vgpdf.New(w, h), nil
	default:
		return nil, fmt.Errorf("%s: unsupported figure format %q, want .png, .svg or .pdf", path, ext)
	}
}
