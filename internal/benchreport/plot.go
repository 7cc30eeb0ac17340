package benchreport

import (
	"errors"
	"fmt"
	"image/color"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// line is one series of a plot.
type line struct {
	name   string
	metric string
	color  color.Color
	dashed bool
	format func(float64) string
	// below puts the value labels under the points, so that they do not
	// cover those of a line just above.
	below bool
}

var (
	blue = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	grey = color.RGBA{R: 0x70, G: 0x70, B: 0x70, A: 0xff}
)

// ErrNoData tells that the results hold nothing to plot.
var ErrNoData = errors.New("no data to plot")

// PlotScaling draws the restore storm's heal time against the number of
// clusters, for the manager and for the raw patch loop, into a PNG file.
func PlotScaling(path string, sums []Summary, qps, burst int) error {
	return drawLines(path, Series(sums, "RestoreStorm", "clusters"),
		"Restore storm: time until every lock is owned again ("+StormLimits(qps, burst)+")",
		"clusters restored", "seconds",
		[]line{
			{name: "initlock manager (cache sync + reconciles)", metric: "manager-s", color: blue, format: func(v float64) string { return fmt.Sprintf("%.1f s", v) }},
			{name: "raw patch loop (floor)", metric: "raw-s", color: grey, dashed: true, below: true, format: func(v float64) string { return fmt.Sprintf("%.1f s", v) }},
		})
}

// PlotMemory draws the manager's heap against the number of unrelated
// ConfigMaps into a PNG file.
func PlotMemory(path string, sums []Summary) error {
	return drawLines(path, Series(sums, "MemoryUnrelatedConfigMaps", "configmaps"),
		"Manager heap against unrelated ConfigMaps in its namespace",
		"unrelated ConfigMaps (1 KiB each)", "MiB of heap added by the manager",
		[]line{
			{name: "with the unrelated ConfigMaps", metric: "MiB-with", color: blue, format: func(v float64) string { return fmt.Sprintf("%.2f MiB", v) }},
			{name: "same clusters, no unrelated ConfigMaps (floor)", metric: "MiB-none", color: grey, dashed: true, below: true,
				format: func(v float64) string { return fmt.Sprintf("%.2f MiB", v) }},
		})
}

func drawLines(path string, points []Point, title, xLabel, yLabel string, lines []line) error {
	if len(points) == 0 {
		return ErrNoData
	}
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(14)
	p.Title.Padding = vg.Points(8)
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.X.Min, p.Y.Min = 0, 0
	p.Add(plotter.NewGrid())
	var ticks []plot.Tick
	for _, pt := range points {
		ticks = append(ticks, plot.Tick{Value: pt.X, Label: strconv.FormatFloat(pt.X, 'f', -1, 64)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	maxY := 0.0
	for _, l := range lines {
		var xys plotter.XYs
		var labels []string
		for _, pt := range points {
			v, ok := pt.Values[l.metric]
			if !ok {
				continue
			}
			xys = append(xys, plotter.XY{X: pt.X, Y: v})
			maxY = max(maxY, v)
			if l.format != nil {
				labels = append(labels, l.format(v))
			}
		}
		if len(xys) == 0 {
			continue
		}
		ln, sc, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		ln.Color, ln.Width = l.color, vg.Points(2)
		if l.dashed {
			ln.Dashes = []vg.Length{vg.Points(6), vg.Points(4)}
		}
		sc.Color, sc.Shape, sc.Radius = l.color, draw.CircleGlyph{}, vg.Points(3.5)
		p.Add(ln, sc)
		p.Legend.Add(l.name, ln, sc)
		if labels != nil {
			lb, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
			if err != nil {
				return err
			}
			for i := range lb.TextStyle {
				lb.TextStyle[i].Color = l.color
				lb.TextStyle[i].Font.Size = vg.Points(9)
			}
			// Above and to the left of a rising line, below and to the
			// right for the line under it.
			lb.Offset = vg.Point{X: vg.Points(-34), Y: vg.Points(8)}
			if l.below {
				lb.Offset = vg.Point{X: vg.Points(6), Y: vg.Points(-14)}
			}
			p.Add(lb)
		}
	}
	p.Y.Max = maxY * 1.2
	p.X.Max = points[len(points)-1].X * 1.12
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(10), vg.Points(-5)
	return p.Save(9*vg.Inch, 5.5*vg.Inch, path)
}
