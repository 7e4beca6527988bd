package main

// Plots for the compare report, drawn with gonum.org/v1/plot.

import (
	"cmp"
	"fmt"
	"image/color"
	"math"
	"os"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// How a plot's x axis maps the data.
const (
	xLinear   = iota // as is, ticks at the data's x values
	xLog2            // log2, ticks at the data's x values (process counts)
	xLog2Size        // log2 of a byte count, 0 drawn one step left of 1, ticks labelled 1, 4, 16, …, 1K, …
)

// Line styles of a series.
const (
	lineSolid = iota
	lineDashed
	lineDotted
)

// plotSeries is one line of a plot.
type plotSeries struct {
	label  string
	color  int // index into plotutil's palette, one per target
	style  int // lineSolid, lineDashed, lineDotted
	xs, ys []float64
}

// plotSpec is a line plot.
type plotSpec struct {
	title, xlabel, ylabel string
	xKind                 int
	logY                  bool
	yRange                [2]float64 // fixed y range when yRange[1] > yRange[0]
	series                []plotSeries
}

// plotSize is the size of every plot image.
var plotW, plotH = 7 * vg.Inch, 4.2 * vg.Inch

// mapX turns a data x into the plotted x.
func mapX(kind int, x float64) float64 {
	switch kind {
	case xLog2:
		return math.Log2(x)
	case xLog2Size:
		if x <= 0 {
			return -1
		}
		return math.Log2(x)
	}
	return x
}

// shortSize labels a byte count: 1, 256, 1K, 64K, 1M.
func shortSize(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + "M"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + "K"
	}
	return strconv.Itoa(n)
}

// xTicks are the ticks of an x axis over the plotted values xs.
func xTicks(kind int, xs []float64) plot.ConstantTicks {
	var ticks plot.ConstantTicks
	if len(xs) == 0 {
		return ticks
	}
	if kind != xLog2Size {
		for _, x := range xs {
			ticks = append(ticks, plot.Tick{Value: mapX(kind, x), Label: strconv.FormatFloat(x, 'g', -1, 64)})
		}
		return ticks
	}
	lo, hi := mapX(kind, slices.Min(xs)), mapX(kind, slices.Max(xs))
	step := 1
	if hi-lo > 12 {
		step = 2
	}
	for e := int(math.Floor(lo)); e <= int(math.Ceil(hi)); e++ {
		t := plot.Tick{Value: float64(e)}
		switch {
		case e < 0:
			t.Label = "0"
		case e%step == 0:
			t.Label = shortSize(1 << e)
		}
		ticks = append(ticks, t)
	}
	return ticks
}

// savePlot draws spec into the PNG file path. A plot without any point is
// not drawn; it reports whether it drew.
func savePlot(path string, spec plotSpec) (bool, error) {
	p := plot.New()
	p.Title.Text = spec.title
	p.X.Label.Text = spec.xlabel
	p.Y.Label.Text = spec.ylabel
	p.Add(plotter.NewGrid())
	leg := plot.NewLegend()
	var allX, allY []float64
	for _, s := range spec.series {
		var pts plotter.XYs
		for i := range s.xs {
			if spec.logY && s.ys[i] <= 0 || math.IsNaN(s.ys[i]) || math.IsInf(s.ys[i], 0) {
				continue
			}
			pts = append(pts, plotter.XY{X: mapX(spec.xKind, s.xs[i]), Y: s.ys[i]})
			allX, allY = append(allX, s.xs[i]), append(allY, s.ys[i])
		}
		if len(pts) == 0 {
			continue
		}
		slices.SortFunc(pts, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return false, err
		}
		col := plotutil.Color(s.color)
		line.Color, points.Color = col, col
		line.Width = vg.Points(1.5)
		points.Shape = plotutil.Shape(s.color)
		points.Radius = vg.Points(2.5)
		switch s.style {
		case lineDashed:
			line.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		case lineDotted:
			line.Dashes = []vg.Length{vg.Points(1.5), vg.Points(2.5)}
		}
		p.Add(line, points)
		leg.Add(s.label, line, points)
	}
	if len(allX) == 0 {
		return false, nil
	}
	slices.Sort(allX)
	allX = slices.Compact(allX)
	p.X.Tick.Marker = xTicks(spec.xKind, allX)
	if spec.xKind == xLog2Size || spec.xKind == xLog2 {
		lo, hi := mapX(spec.xKind, allX[0]), mapX(spec.xKind, allX[len(allX)-1])
		p.X.Min, p.X.Max = lo-0.3, hi+0.3
	}
	if spec.logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = decadeTicks{}
		// Whole decades at both ends, so that the axis always has labels.
		p.Y.Min = math.Pow(10, math.Floor(math.Log10(slices.Min(allY))))
		p.Y.Max = math.Pow(10, math.Ceil(math.Log10(slices.Max(allY))))
		if p.Y.Max <= p.Y.Min {
			p.Y.Max = p.Y.Min * 10
		}
	}
	if spec.yRange[1] > spec.yRange[0] {
		p.Y.Min, p.Y.Max = spec.yRange[0], spec.yRange[1]
	}
	return true, saveWithLegend(p, leg, path)
}

// barSeries is one target's bars in a grouped bar chart.
type barSeries struct {
	label  string
	color  int
	values []float64 // one per group; NaN = missing
}

// saveBars draws a grouped bar chart: one group per name, one bar per series.
func saveBars(path, title, ylabel string, groups []string, series []barSeries) (bool, error) {
	if len(groups) == 0 || len(series) == 0 {
		return false, nil
	}
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Add(plotter.NewGrid())
	width := vg.Points(math.Min(24, 240/float64(len(groups)*len(series))))
	n := float64(len(series))
	leg := plot.NewLegend()
	drawn, top := false, 0.0
	for i, s := range series {
		vals := make(plotter.Values, len(s.values))
		for j, v := range s.values {
			if !math.IsNaN(v) {
				vals[j] = v
				drawn, top = true, max(top, v)
			}
		}
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return false, fmt.Errorf("%s: %v", s.label, err)
		}
		bars.Color = plotutil.Color(s.color)
		bars.LineStyle.Width = 0
		bars.Offset = vg.Length(float64(i)-(n-1)/2) * width
		p.Add(bars)
		leg.Add(s.label, bars)
	}
	if !drawn {
		return false, nil
	}
	p.NominalX(groups...)
	p.X.Min, p.X.Max = -0.5, float64(len(groups))-0.5
	p.Y.Min, p.Y.Max = 0, top*1.1
	return true, saveWithLegend(p, leg, path)
}

// saveWithLegend draws p with leg to its right, outside the data area, into
// a PNG file.
func saveWithLegend(p *plot.Plot, leg plot.Legend, path string) error {
	img := vgimg.New(plotW, plotH)
	dc := draw.New(img)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	pad := vg.Points(8)
	leg.Top, leg.Left = true, true
	legR := leg.Rectangle(dc)
	legW := legR.Max.X - legR.Min.X + 2*pad
	p.Draw(draw.Crop(dc, 0, -legW, 0, 0))
	// Start the legend level with the top of the data area, below the title.
	leg.YOffs = -p.Title.TextStyle.Height(p.Title.Text) - 2*pad
	leg.Draw(draw.Crop(dc, plotW-legW+pad/2, 0, 0, 0))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// decadeTicks marks a log axis: a label at each power of ten, minor ticks
// at 2–9 times it.
type decadeTicks struct{}

func (decadeTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for e := int(math.Floor(math.Log10(lo) + 1e-9)); e <= int(math.Ceil(math.Log10(hi)-1e-9)); e++ {
		d := math.Pow(10, float64(e))
		if d >= lo*(1-1e-9) && d <= hi*(1+1e-9) {
			label := strconv.FormatFloat(d, 'f', -1, 64)
			if e >= 6 || e <= -4 {
				label = "1e" + strconv.Itoa(e)
			}
			ticks = append(ticks, plot.Tick{Value: d, Label: label})
		}
		for i := 2; i < 10; i++ {
			if v := d * float64(i); v > lo && v < hi {
				ticks = append(ticks, plot.Tick{Value: v})
			}
		}
	}
	return ticks
}
