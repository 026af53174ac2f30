package console

import (
	"fmt"
	"strings"

	"github.com/fleetq/fleetq/pkg/domain/wire"
)

// Chart geometry, in SVG user units.
const (
	chartW, chartH         = 720, 220
	padL, padR, padT, padB = 40, 12, 12, 28
)

// chart is one fleet's recent decisions as three lines over time: desired,
// in service, and the queued plus leased work the decision saw.
type chart struct {
	W, H   int
	Series []series
	// Marks are one hover band per decision, titled with its reason.
	Marks []mark
	// Ticks are the y axis's labelled values.
	Ticks                    []tick
	First, Last              string
	Left, Right, Top, Bottom int
	Empty                    bool
}

type series struct {
	Name, Class, Points string
}

type mark struct {
	X, W  float64
	Title string
	// Dots are the decision's values on each series.
	Dots []dot
}

type dot struct {
	Y     float64
	Class string
}

type tick struct {
	Y     float64
	Label int
}

// newChart lays out a fleet's decision history, oldest on the left.
func newChart(f wire.Fleet) chart {
	c := chart{W: chartW, H: chartH, Left: padL, Right: chartW - padR, Top: padT, Bottom: chartH - padB}
	ds := make([]wire.Decision, 0, len(f.History))
	for i := len(f.History) - 1; i >= 0; i-- {
		ds = append(ds, f.History[i])
	}
	if len(ds) == 0 && f.LastDecision != nil {
		ds = append(ds, *f.LastDecision)
	}
	if len(ds) == 0 {
		c.Empty = true
		return c
	}
	top := 1
	for _, d := range ds {
		top = max(top, d.Desired, d.InService, work(d))
	}
	plotW := float64(c.Right - c.Left)
	step := plotW
	if len(ds) > 1 {
		step = plotW / float64(len(ds)-1)
	}
	x := func(i int) float64 {
		if len(ds) == 1 {
			return float64(c.Left) + plotW/2
		}
		return float64(c.Left) + float64(i)*step
	}
	y := func(v int) float64 {
		return float64(c.Bottom) - float64(v)*float64(c.Bottom-c.Top)/float64(top)
	}
	lines := []struct {
		name, class string
		val         func(wire.Decision) int
	}{
		{"desired", "desired", func(d wire.Decision) int { return d.Desired }},
		{"in service", "inservice", func(d wire.Decision) int { return d.InService }},
		{"queued + leased", "work", work},
	}
	for _, l := range lines {
		pts := make([]string, len(ds))
		for i, d := range ds {
			pts[i] = fmt.Sprintf("%.1f,%.1f", x(i), y(l.val(d)))
		}
		c.Series = append(c.Series, series{Name: l.name, Class: l.class, Points: strings.Join(pts, " ")})
	}
	for i, d := range ds {
		m := mark{X: x(i) - step/2, W: step, Title: fmt.Sprintf("%s: desired %d, in service %d, queued+leased %d: %s",
			short(d.At), d.Desired, d.InService, work(d), d.Reason)}
		if len(ds) == 1 {
			m.X, m.W = float64(c.Left), plotW
		}
		for _, l := range lines {
			m.Dots = append(m.Dots, dot{Y: y(l.val(d)), Class: l.class})
		}
		c.Marks = append(c.Marks, m)
	}
	for _, v := range []int{0, top / 2, top} {
		if n := len(c.Ticks); n > 0 && c.Ticks[n-1].Label == v {
			continue
		}
		c.Ticks = append(c.Ticks, tick{Y: y(v), Label: v})
	}
	c.First, c.Last = short(ds[0].At), short(ds[len(ds)-1].At)
	return c
}

// work is the ready plus leased jobs a decision saw.
func work(d wire.Decision) int { return d.Inputs["ready"] + d.Inputs["leased"] }

// DotX is a mark's centre.
func (m mark) DotX() float64 { return m.X + m.W/2 }
