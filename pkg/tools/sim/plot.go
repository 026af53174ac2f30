package sim

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// WritePlot draws, one panel per policy, the instances in service and the
// jobs waiting over the workload's days in hours, each panel on its own
// count scale, with a cross at zero for every job killed. The file name's
// extension (.svg or .png) picks the format.
func (r Report) WritePlot(w io.Writer, filename string) error {
	if len(r.Results) == 0 {
		return fmt.Errorf("nothing to plot")
	}
	ext := strings.ToLower(filepath.Ext(filename))
	if ext != ".svg" && ext != ".png" {
		return fmt.Errorf("plot %s: use a .svg or .png file name", filename)
	}
	rows := make([][]*plot.Plot, len(r.Results))
	for i, res := range r.Results {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s — %s: killed %d, GPU-h %.1f, p95 wait %s", r.Workload, res.Policy, res.Killed, res.GPUHours, dur(res.P95WaitS))
		p.X.Label.Text = "hours"
		p.Y.Label.Text = "count"
		// Each panel its own scale; the x axis the workload's days (the
		// hours the run goes on to finish its work are left out).
		maxY := 1.0
		for _, s := range res.Timeline {
			maxY = max(maxY, float64(s.InService), float64(s.Waiting))
		}
		p.Y.Min, p.Y.Max = 0, maxY*1.1
		p.Y.Tick.Marker = integerTicks{}
		inService, waiting := make(plotter.XYs, len(res.Timeline)), make(plotter.XYs, len(res.Timeline))
		for k, s := range res.Timeline {
			h := s.At.Hours()
			inService[k] = plotter.XY{X: h, Y: float64(s.InService)}
			waiting[k] = plotter.XY{X: h, Y: float64(s.Waiting)}
		}
		a, err := plotter.NewLine(inService)
		if err != nil {
			return err
		}
		a.Color, a.Width = color.RGBA{R: 31, G: 119, B: 180, A: 255}, vg.Points(1.2)
		b, err := plotter.NewLine(waiting)
		if err != nil {
			return err
		}
		b.Color, b.Width = color.RGBA{R: 214, G: 39, B: 40, A: 255}, vg.Points(1.2)
		if len(res.KillTimes) > 0 {
			kills := make(plotter.XYs, len(res.KillTimes))
			for k, at := range res.KillTimes {
				kills[k] = plotter.XY{X: at.Hours(), Y: 0}
			}
			sc, err := plotter.NewScatter(kills)
			if err != nil {
				return err
			}
			sc.GlyphStyle.Shape, sc.GlyphStyle.Color, sc.GlyphStyle.Radius = draw.CrossGlyph{}, color.Black, vg.Points(3)
			p.Add(sc)
			p.Legend.Add("job killed", sc)
		}
		p.Add(a, b, plotter.NewGrid())
		p.Y.Min, p.Y.Max = 0, maxY*1.1 // Add widens the axes to the data
		if res.WorkloadEnd > 0 {
			p.X.Min, p.X.Max = 0, res.WorkloadEnd.Hours()
		}
		p.Legend.Add("instances in service", a)
		p.Legend.Add("jobs waiting", b)
		p.Legend.Top = true
		rows[i] = []*plot.Plot{p}
	}
	width, height := 28*vg.Centimeter, vg.Length(len(rows))*7*vg.Centimeter
	var canvas vg.CanvasSizer
	if ext == ".svg" {
		canvas = vgsvg.New(width, height)
	} else {
		canvas = vgimg.New(width, height)
	}
	dc := draw.New(canvas)
	tiles := draw.Tiles{Rows: len(rows), Cols: 1, PadTop: vg.Centimeter / 2, PadBottom: vg.Centimeter / 2, PadLeft: vg.Centimeter / 2, PadRight: vg.Centimeter / 2, PadY: vg.Centimeter}
	cs := plot.Align(rows, tiles, dc)
	for i := range rows {
		rows[i][0].Draw(cs[i][0])
	}
	var err error
	switch c := canvas.(type) {
	case *vgsvg.Canvas:
		_, err = c.WriteTo(w)
	case *vgimg.Canvas:
		_, err = vgimg.PngCanvas{Canvas: c}.WriteTo(w)
	}
	return err
}

// integerTicks marks a count axis at whole numbers only, 1, 2 or 5 times a
// power of ten apart, at most about eight marks.
type integerTicks struct{}

// Ticks implements plot.Ticker.
func (integerTicks) Ticks(lo, hi float64) []plot.Tick {
	step := 1.0
search:
	for m := 1.0; m < 1e9; m *= 10 {
		for _, f := range []float64{1, 2, 5} {
			if step = f * m; (hi-lo)/step <= 8 {
				break search
			}
		}
	}
	var ts []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi; v += step {
		ts = append(ts, plot.Tick{Value: v, Label: strconv.Itoa(int(v))})
	}
	return ts
}
