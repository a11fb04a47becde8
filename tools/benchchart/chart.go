package main

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// The chart's geometry.
const (
	chartWidth = 30 * vg.Centimeter
	titleRoom  = 2.4 * vg.Centimeter    // the title's three lines
	panelRoom  = 2.9 * vg.Centimeter    // a panel's title, x axis and its label, and a margin
	rowRoom    = 1.55 * vg.Centimeter   // one row: three lines of label
	margin     = 10 * vg.Millimeter / 3 // around and between the panels
)

// The colours of the verdicts, and of the target line.
var (
	colorMet       = color.RGBA{R: 0x1a, G: 0x7f, B: 0x37, A: 0xff}
	colorNotMet    = color.RGBA{R: 0xc6, G: 0x28, B: 0x28, A: 0xff}
	colorUndecided = color.RGBA{R: 0xe0, G: 0x8a, B: 0x00, A: 0xff}
	colorTarget    = color.RGBA{R: 0x44, G: 0x44, B: 0x44, A: 0xff}
)

// sans is the chart's font (gonum's default is a serif).
var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

// panelTitles names the harness's tables; another table is titled by its own name.
var panelTitles = map[string]string{
	"reference":     "The SDK against its reference, ratio of the same repeat",
	"floor":         "The contract's floor against the same reference: is the target within reach?",
	"absolute":      "Absolute targets",
	"tracing":       "What bqotel adds, µs of CPU a message over the untraced SDK",
	"latency":       "Latency under load",
	"latency floor": "Latency under load, the contract floor: is the target within reach?",
}

// render draws f as an SVG document.
func render(f judgedFile) ([]byte, error) {
	svg := vgsvg.New(chartWidth, chartHeight(f))
	drawChart(draw.New(svg), f)
	var out bytes.Buffer
	if _, err := svg.WriteTo(&out); err != nil {
		return nil, fmt.Errorf("benchchart: writing the SVG: %w", err)
	}
	return out.Bytes(), nil
}

// chartHeight is the height of f's chart: the title's and every panel's room.
func chartHeight(f judgedFile) vg.Length {
	tables, byTable := groupByTable(f.Rows)
	height := titleRoom
	for _, t := range tables {
		height += panelRoom + vg.Length(len(byTable[t]))*rowRoom
	}
	return height
}

// drawChart draws f on dc, chartWidth by chartHeight(f): the title, then one panel per
// table of the rows (in the order the tables first appear), each row one line.
func drawChart(dc draw.Canvas, f judgedFile) {
	tables, byTable := groupByTable(f.Rows)
	width, height := dc.Max.X-dc.Min.X, dc.Max.Y-dc.Min.Y
	dc.SetColor(color.White) // a page of its own, on a dark viewer too
	dc.Fill(dc.Path())
	titleStyle := textStyle(13)
	titleStyle.XAlign, titleStyle.YAlign = draw.XCenter, draw.YTop
	dc.FillText(titleStyle, vg.Point{X: dc.Min.X + width/2, Y: dc.Max.Y - vg.Points(8)}, title(f.Header))

	plots := make([]*plot.Plot, len(tables))
	canvases := make([]draw.Canvas, len(tables))
	top := titleRoom // from the top of dc
	for i, t := range tables {
		rows := byTable[t]
		h := panelRoom + vg.Length(len(rows))*rowRoom
		plots[i] = panel(t, rows)
		canvases[i] = draw.Crop(dc, margin, -margin, height-top-h, -top-margin)
		top += h
	}
	// Line the panels' data areas up on the left: each is cropped by how much narrower
	// its labels are than the widest.
	left := make([]vg.Length, len(plots))
	var widest vg.Length
	for i, p := range plots {
		left[i] = p.DataCanvas(canvases[i]).Min.X - canvases[i].Min.X
		widest = max(widest, left[i])
	}
	for i, p := range plots {
		p.Draw(draw.Crop(canvases[i], widest-left[i], 0, 0, 0))
	}
}

// groupByTable returns the tables of rows in the order they first appear, and the rows of
// each in their order.
func groupByTable(rows []row) ([]string, map[string][]row) {
	var tables []string
	byTable := map[string][]row{}
	for _, r := range rows {
		if _, seen := byTable[r.Table]; !seen {
			tables = append(tables, r.Table)
		}
		byTable[r.Table] = append(byTable[r.Table], r)
	}
	return tables, byTable
}

// title is the chart's title: what it shows, the broker and the run's parameters.
func title(h header) string {
	return fmt.Sprintf("bench-compare: judged rows, each figure over its target (left of 1 is good)\n%s\n%d messages a window × %d repeats, GOMAXPROCS=%d, %s, %s",
		h.Broker, h.N, h.Repeats, h.GOMAXPROCS, h.Platform, h.Date)
}

// panel is the plot of one table's rows, the first row at the top.
func panel(table string, rows []row) *plot.Plot {
	p := plot.New()
	p.Title.Text = panelTitles[table]
	if p.Title.Text == "" {
		p.Title.Text = table
	}
	p.Title.TextStyle.Font = font.From(sans, 11)
	p.X.Label.Text = "figure / target (target / figure for an at-least row)"
	p.X.Label.TextStyle.Font = font.From(sans, 9)
	p.X.Tick.Label.Font = font.From(sans, 9)
	p.X.Tick.Marker = targetTicks{}
	p.Y.Tick.Label.Font = font.From(sans, 9)
	p.Add(rowsPlotter{rows: rows})
	p.X.Min, p.X.Max = padded(p.X.Min, p.X.Max)
	labels := make([]string, len(rows))
	for i, r := range rows { // NominalY counts from the bottom
		labels[len(rows)-1-i] = label(r)
	}
	p.NominalY(labels...)
	p.Y.Min, p.Y.Max = -0.5, float64(len(rows))-0.5
	return p
}

// padded widens [lo, hi] by 5 % on each side.
func padded(lo, hi float64) (float64, float64) {
	pad := (hi - lo) * 0.05
	if pad == 0 {
		pad = 0.05
	}
	return lo - pad, hi + pad
}

// label is a row's text: the comparison, the variant against its reference, and the raw
// figures with the target and the verdict.
func label(r row) string {
	ci := "no interval (fewer than 6 repeats)"
	if r.HasCI {
		ci = fmt.Sprintf("[%.2f–%.2f]", r.Lo, r.Hi)
	}
	return fmt.Sprintf("%s\n%s\n%s %.2f %s, target %s: %s", r.Comparison, r.Variant, r.Metric, r.Median, ci, r.TargetText, strings.ToUpper(r.Verdict))
}

// textStyle is the chart's text in the given size, in points, aligned left and at the
// bottom.
func textStyle(size vg.Length) text.Style {
	return text.Style{Color: color.Black, Font: font.From(sans, size), Handler: plot.DefaultTextHandler}
}

// targetTicks are gonum's default ticks with the target, 1, labelled among them, unless
// a labelled tick is so close that the labels would run together (the dashed line still
// marks it).
type targetTicks struct{}

// Ticks implements plot.Ticker.
func (targetTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	if lo > 1 || hi < 1 {
		return ticks
	}
	for i, t := range ticks {
		if t.Label == "" {
			continue
		}
		if math.Abs(t.Value-1) < 1e-9 {
			ticks[i].Label = "1"
			return ticks
		}
		if math.Abs(t.Value-1) < (hi-lo)*0.08 {
			return ticks
		}
	}
	return append(ticks, plot.Tick{Value: 1, Label: "1"})
}

// rowsPlotter draws the rows of a panel on the normalized scale (row.normalized): for
// each row its interval as a horizontal error bar and its median as a dot, coloured by the
// verdict, the interval's bound (hi_max) as a short dashed tick, and the target as a
// vertical dashed line at 1.
type rowsPlotter struct {
	rows []row
}

// Plot implements plot.Plotter.
func (rp rowsPlotter) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	n := len(rp.rows)
	dashed := draw.LineStyle{Color: colorTarget, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
	c.StrokeLine2(dashed, trX(1), trY(-0.5), trX(1), trY(float64(n)-0.5))
	for i, r := range rp.rows {
		b, y := r.normalized(), float64(n-1-i)
		col := verdictColor(r.Verdict)
		if r.HasCI {
			line := draw.LineStyle{Color: col, Width: vg.Points(2)}
			c.StrokeLine2(line, trX(b.lo), trY(y), trX(b.hi), trY(y))
			for _, x := range []float64{b.lo, b.hi} {
				c.StrokeLine2(line, trX(x), trY(y-0.12), trX(x), trY(y+0.12))
			}
		}
		if b.hiMax > 0 {
			c.StrokeLine2(dashed, trX(b.hiMax), trY(y-0.3), trX(b.hiMax), trY(y+0.3))
		}
		c.DrawGlyph(draw.GlyphStyle{Color: col, Radius: vg.Points(4), Shape: draw.CircleGlyph{}}, vg.Point{X: trX(b.x), Y: trY(y)})
	}
}

// DataRange implements plot.DataRanger: every interval, median and bound, and the target.
func (rp rowsPlotter) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = 1, 1
	for _, r := range rp.rows {
		b := r.normalized()
		xmin, xmax = math.Min(xmin, math.Min(b.lo, b.x)), math.Max(xmax, math.Max(b.hi, b.x))
		if b.hiMax > 0 {
			xmin, xmax = math.Min(xmin, b.hiMax), math.Max(xmax, b.hiMax)
		}
	}
	return xmin, xmax, -0.5, float64(len(rp.rows)) - 0.5
}

// verdictColor is the colour of a verdict.
func verdictColor(v string) color.Color {
	switch v {
	case verdictMet:
		return colorMet
	case verdictNotMet:
		return colorNotMet
	default:
		return colorUndecided
	}
}
