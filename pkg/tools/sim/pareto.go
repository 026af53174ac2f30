package sim

import (
	"fmt"
	"image/color"
	"io"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// WritePareto draws one point per result: GPU-hours across, p95 wait in
// minutes up, labelled with the result's policy (and setting), so the
// policies that are better on both lie towards the lower left. The file
// name's extension (.svg or .png) picks the format.
func WritePareto(w io.Writer, filename, title string, results []Result) error {
	if len(results) == 0 {
		return fmt.Errorf("nothing to plot")
	}
	ext := strings.ToLower(filepath.Ext(filename))
	if ext != ".svg" && ext != ".png" {
		return fmt.Errorf("pareto %s: use a .svg or .png file name", filename)
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "GPU-hours"
	p.Y.Label.Text = "p95 wait (minutes)"
	// p95 waits span seconds to hours: a log scale keeps the good
	// policies apart; each point has its own colour and legend entry.
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	lo := 0.1
	maxX := 0.0
	for i, r := range results {
		y := max(r.P95WaitS/60, lo)
		sc, err := plotter.NewScatter(plotter.XYs{{X: r.GPUHours, Y: y}})
		if err != nil {
			return err
		}
		sc.GlyphStyle.Shape, sc.GlyphStyle.Radius = glyphs[i%len(glyphs)], vg.Points(4)
		sc.GlyphStyle.Color = palette[i%len(palette)]
		p.Add(sc)
		p.Legend.Add(fmt.Sprintf("%s: %.1f GPU-h, p95 %s, killed %d", r.Policy, r.GPUHours, dur(r.P95WaitS), r.Killed), sc)
		maxX = max(maxX, r.GPUHours)
	}
	p.Add(plotter.NewGrid())
	p.X.Min, p.X.Max = 0, maxX*1.05
	p.Y.Min = lo
	p.Y.Max *= 2
	p.Legend.Left = true // the lower left: below the waits, clear of the points
	width, height := 24*vg.Centimeter, 16*vg.Centimeter
	if ext == ".svg" {
		c := vgsvg.New(width, height)
		p.Draw(draw.New(c))
		_, err := c.WriteTo(w)
		return err
	}
	c := vgimg.New(width, height)
	p.Draw(draw.New(c))
	_, err := vgimg.PngCanvas{Canvas: c}.WriteTo(w)
	return err
}

var palette = []color.Color{
	color.RGBA{R: 31, G: 119, B: 180, A: 255}, color.RGBA{R: 214, G: 39, B: 40, A: 255},
	color.RGBA{R: 44, G: 160, B: 44, A: 255}, color.RGBA{R: 255, G: 127, B: 14, A: 255},
	color.RGBA{R: 148, G: 103, B: 189, A: 255}, color.RGBA{R: 140, G: 86, B: 75, A: 255},
	color.RGBA{R: 227, G: 119, B: 194, A: 255}, color.RGBA{R: 127, G: 127, B: 127, A: 255},
}

var glyphs = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.RingGlyph{}, draw.BoxGlyph{}, draw.PyramidGlyph{}, draw.CrossGlyph{}, draw.PlusGlyph{}}
