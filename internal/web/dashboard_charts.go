package web

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/heraldhooks/herald/internal/wire"
)

// The charts of the overview are drawn on the server as inline SVG: no
// script, no inline style (the CSP forbids both), every color a class of
// herald.css. Each has a <title> and a <desc> that says what it shows in
// words, and the numbers behind it are in a table beside it.

// Chart sizes, in the SVG's user units; it is scaled to its box by CSS.
const (
	chartWidth  = 600
	chartHeight = 120
	chartPad    = 4 // room above the highest point and below the lowest
)

// chart is one drawn series set over one window.
type chart struct {
	// ID makes the <title> and <desc> ids unique on the page.
	ID    string
	Title string
	Desc  string
	// Max labels the top of the scale ("12.5/s", "100 %", "250 ms").
	Max   string
	Lines []chartLine
	// From and To label the ends of the time axis.
	From, To string
}

// chartLine is one series of a chart: its polylines (a gap where a point
// has no value, as a success rate has none without attempts), drawn with
// Class.
type chartLine struct {
	Class, Label string
	Segments     []string
}

// seriesValue reads one value of a point; ok is false where it has none.
type seriesValue func(p *wire.StatsPoint) (v float64, ok bool)

// chartLineSpec names a line of a chart and where its values come from;
// none is what its description says when no point has a value (default
// "no attempts").
type chartLineSpec struct {
	class, label string
	value        seriesValue
	none         string
}

// newChart draws lines over points, scaled from 0 to the largest value
// (or fixedMax when it is above 0: rates, from 0 to 1).
func newChart(id, title string, s *wire.StatsSeries, fixedMax float64, unit func(float64) string, lines ...chartLineSpec) chart {
	top := fixedMax
	if top <= 0 {
		for _, l := range lines {
			for i := range s.Points {
				if v, ok := l.value(&s.Points[i]); ok {
					top = max(top, v)
				}
			}
		}
		top = niceCeil(top)
	}
	c := chart{ID: id, Title: title, Max: unit(top)}
	if len(s.Points) > 0 {
		c.From = s.Points[0].At.UTC().Format("Jan 2 15:04")
		step := time.Minute
		if len(s.Points) > 1 {
			step = s.Points[1].At.Sub(s.Points[0].At)
		}
		c.To = s.Points[len(s.Points)-1].At.Add(step).UTC().Format("Jan 2 15:04")
	}
	var desc []string
	for _, l := range lines {
		c.Lines = append(c.Lines, chartLine{Class: l.class, Label: l.label, Segments: segments(s.Points, l.value, top)})
		none := l.none
		if none == "" {
			none = "no attempts"
		}
		desc = append(desc, describe(l.label, none, s.Points, l.value, unit))
	}
	c.Desc = fmt.Sprintf("%s, %s to %s UTC, one point per %s. %s", title, c.From, c.To, stepName(s.Step), strings.Join(desc, " "))
	return c
}

// segments turns the points into polyline point lists, x across the
// width by index, y from the bottom (0) to the top (top); a point without
// a value ends a segment. A lone point is drawn as a short dash.
func segments(points []wire.StatsPoint, value seriesValue, top float64) []string {
	n := len(points)
	if n == 0 || top <= 0 {
		return nil
	}
	x := func(i int) float64 {
		if n == 1 {
			return chartWidth / 2
		}
		return float64(i) * chartWidth / float64(n-1)
	}
	y := func(v float64) float64 {
		return chartHeight - chartPad - min(v/top, 1)*(chartHeight-2*chartPad)
	}
	var (
		out []string
		cur []string
	)
	flush := func() {
		switch len(cur) {
		case 0:
			return
		case 1: // a lone point: a dash as wide as its step
			xy := strings.Split(cur[0], ",")
			px, _ := strconv.ParseFloat(xy[0], 64)
			half := float64(chartWidth) / 2
			if n > 1 {
				half = max(3, float64(chartWidth)/float64(n-1)/2)
			}
			cur = []string{coord(max(0, px-half), mustFloat(xy[1])), coord(min(chartWidth, px+half), mustFloat(xy[1]))}
		}
		out = append(out, strings.Join(cur, " "))
		cur = nil
	}
	for i := range points {
		v, ok := value(&points[i])
		if !ok {
			flush()
			continue
		}
		cur = append(cur, coord(x(i), y(v)))
	}
	flush()
	return out
}

func coord(x, y float64) string {
	return strconv.FormatFloat(x, 'f', 1, 64) + "," + strconv.FormatFloat(y, 'f', 1, 64)
}

func mustFloat(s string) float64 {
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten, so a scale's
// top reads well; 0 stays 1.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// describe says a line's range in words, for the chart's <desc>; none is
// what it says when no point has a value.
func describe(label, none string, points []wire.StatsPoint, value seriesValue, unit func(float64) string) string {
	var (
		n             int
		sum, hi       float64
		hiAt, lastVal string
	)
	for i := range points {
		v, ok := value(&points[i])
		if !ok {
			continue
		}
		n++
		sum += v
		if v >= hi {
			hi, hiAt = v, points[i].At.UTC().Format("15:04")
		}
		lastVal = unit(v)
	}
	if n == 0 {
		return label + ": " + none + "."
	}
	return fmt.Sprintf("%s: average %s, highest %s at %s, last %s.", label, unit(sum/float64(n)), unit(hi), hiAt, lastVal)
}

func stepName(step string) string {
	if step == "15m" {
		return "15 minutes"
	}
	return "minute"
}

// Units of the charts and the figures.
func perSecond(v float64) string { return trimFloat(v) + "/s" }
func percent(v float64) string   { return trimFloat(v*100) + " %" }
func millis(v float64) string    { return trimFloat(v) + " ms" }
func seconds(v float64) string   { return trimFloat(v) + " s" }

// countOf shows a whole number as one, and an average of counts as
// trimFloat does.
func countOf(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatInt(int64(v), 10)
	}
	return trimFloat(v)
}

// trimFloat shows v with at most 3 significant decimals.
func trimFloat(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// The values the charts draw.
var (
	valueRate    = func(p *wire.StatsPoint) (float64, bool) { return p.DeliveriesPerSecond, true }
	valueSuccess = func(p *wire.StatsPoint) (float64, bool) {
		if p.SuccessRate == nil {
			return 0, false
		}
		return *p.SuccessRate, true
	}
	valueP50 = func(p *wire.StatsPoint) (float64, bool) {
		if p.LatencyP50MS == nil {
			return 0, false
		}
		return *p.LatencyP50MS, true
	}
	valueP95 = func(p *wire.StatsPoint) (float64, bool) {
		if p.LatencyP95MS == nil {
			return 0, false
		}
		return *p.LatencyP95MS, true
	}
	valueRetryRate     = ratioOf(func(p *wire.StatsPoint) int64 { return p.Retries })
	valueExhaustedRate = ratioOf(func(p *wire.StatsPoint) int64 { return p.Exhausted })
	// The queue's depth: none where no sample was taken (a gap).
	valueDue    = sampledCount(func(p *wire.StatsPoint) *int64 { return p.DueNow })
	valueDead   = sampledCount(func(p *wire.StatsPoint) *int64 { return p.Dead })
	valueOldest = func(p *wire.StatsPoint) (float64, bool) {
		if p.OldestDueSeconds == nil {
			return 0, false
		}
		return *p.OldestDueSeconds, true
	}
)

// sampledCount is a depth sample's count; none where there is none.
func sampledCount(field func(p *wire.StatsPoint) *int64) seriesValue {
	return func(p *wire.StatsPoint) (float64, bool) {
		v := field(p)
		if v == nil {
			return 0, false
		}
		return float64(*v), true
	}
}

// ratioOf is a count's share of the point's attempts; none without any.
func ratioOf(count func(p *wire.StatsPoint) int64) seriesValue {
	return func(p *wire.StatsPoint) (float64, bool) {
		if p.Attempts == 0 {
			return 0, false
		}
		return float64(count(p)) / float64(p.Attempts), true
	}
}

// seriesCharts are the overview's charts of one window.
func seriesCharts(prefix string, s *wire.StatsSeries) []chart {
	return []chart{
		newChart(prefix+"-rate", "Deliveries per second", s, 0, perSecond,
			chartLineSpec{"rate", "Attempts per second", valueRate, ""}),
		newChart(prefix+"-success", "Success rate", s, 1, percent,
			chartLineSpec{"success", "Answered 2xx", valueSuccess, ""}),
		newChart(prefix+"-latency", "Attempt latency", s, 0, millis,
			chartLineSpec{"p50", "p50", valueP50, ""}, chartLineSpec{"p95", "p95", valueP95, ""}),
		newChart(prefix+"-retries", "Retry and exhaustion rate", s, 0, percent,
			chartLineSpec{"retry", "Retried", valueRetryRate, ""}, chartLineSpec{"exhausted", "Went dead", valueExhaustedRate, ""}),
		depthChart(prefix+"-due", "Due now", s, countOf, chartLineSpec{"due", "Due now", valueDue, "no sample"}),
		depthChart(prefix+"-oldest", "Oldest due age", s, seconds, chartLineSpec{"oldest", "Oldest due waited", valueOldest, "no sample"}),
		depthChart(prefix+"-dead", "Dead-letter depth", s, countOf, chartLineSpec{"dead", "Dead letters", valueDead, "no sample"}),
	}
}

// depthChart draws a level of the queue sampled once a minute, and says
// how: a step of several minutes shows its highest sample, and a time
// without a sample is a gap in the line, not a zero.
func depthChart(id, title string, s *wire.StatsSeries, unit func(float64) string, line chartLineSpec) chart {
	c := newChart(id, title, s, 0, unit, line)
	how := "Sampled once a minute"
	if s.Step != "1m" {
		how += ", each point the highest sample of its " + stepName(s.Step)
	}
	c.Desc += " " + how + "; a gap is a time without a sample."
	return c
}

// recent sums the last n points of a series: the overview's figures of
// "now".
type recent struct {
	Minutes                          int
	Attempts, Succeeded              int64
	Retries, Exhausted               int64
	PerSecond                        float64
	SuccessRate, RetryRate, DeadRate string
	// P50 and P95 are those of the last minute with attempts.
	P50, P95 string
}

func recentOf(s *wire.StatsSeries, n int, step time.Duration) recent {
	r := recent{Minutes: n, SuccessRate: "—", RetryRate: "—", DeadRate: "—", P50: "—", P95: "—"}
	pts := s.Points[max(0, len(s.Points)-n):]
	for i := range pts {
		p := &pts[i]
		r.Attempts += p.Attempts
		r.Succeeded += p.Succeeded
		r.Retries += p.Retries
		r.Exhausted += p.Exhausted
		if p.LatencyP50MS != nil && p.LatencyP95MS != nil {
			r.P50, r.P95 = millis(*p.LatencyP50MS), millis(*p.LatencyP95MS)
		}
	}
	if len(pts) > 0 {
		r.PerSecond = float64(r.Attempts) / (float64(len(pts)) * step.Seconds())
	}
	if r.Attempts > 0 {
		a := float64(r.Attempts)
		r.SuccessRate = percent(float64(r.Succeeded) / a)
		r.RetryRate = percent(float64(r.Retries) / a)
		r.DeadRate = percent(float64(r.Exhausted) / a)
	}
	return r
}

// seriesRow is one line of a series' table of numbers.
type seriesRow struct {
	At                           string
	Attempts, Succeeded, Failed  int64
	Retries, Exhausted           int64
	PerSecond, Success, P50, P95 string
	// Due, Oldest and Dead are the depth sampled, "—" where none was.
	Due, Oldest, Dead string
}

func seriesRows(s *wire.StatsSeries) []seriesRow {
	out := make([]seriesRow, len(s.Points))
	for i := range s.Points {
		p := &s.Points[i]
		row := seriesRow{At: p.At.UTC().Format("2006-01-02 15:04"), Attempts: p.Attempts, Succeeded: p.Succeeded,
			Failed: p.Failed, Retries: p.Retries, Exhausted: p.Exhausted, PerSecond: trimFloat(p.DeliveriesPerSecond),
			Success: "—", P50: "—", P95: "—", Due: "—", Oldest: "—", Dead: "—"}
		if v, ok := valueSuccess(p); ok {
			row.Success = percent(v)
		}
		if v, ok := valueP50(p); ok {
			row.P50 = millis(v)
		}
		if v, ok := valueP95(p); ok {
			row.P95 = millis(v)
		}
		if v, ok := valueDue(p); ok {
			row.Due = countOf(v)
		}
		if v, ok := valueOldest(p); ok {
			row.Oldest = seconds(v)
		}
		if v, ok := valueDead(p); ok {
			row.Dead = countOf(v)
		}
		out[i] = row
	}
	return out
}
