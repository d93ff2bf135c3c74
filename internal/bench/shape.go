package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"
)

// The shapes a --shape run tries when none are given: the same load to
// one endpoint, a hundred and ten thousand, with receivers that answer at
// once and receivers that take a quarter of a second.
var (
	DefaultShapeEndpoints = []int{1, 100, 10_000}
	DefaultShapeDelays    = []time.Duration{0, 250 * time.Millisecond}
)

// MaxShapes is the most runs one --shape asks for.
const MaxShapes = 24

// ShapeReport is a --shape run: the same load, rate and length spread over
// each number of endpoints, with each receiver delay, one run each.
type ShapeReport struct {
	Shapes []Shape `json:"shapes"`
	// BestP99MS and WorstP99MS are the lowest and highest p99 latency of
	// the shapes, P99Ratio the worst over the best.
	BestP99MS  float64 `json:"best_p99_ms"`
	WorstP99MS float64 `json:"worst_p99_ms"`
	P99Ratio   float64 `json:"p99_ratio"`
	// Behind lists the shapes that fell behind: deliveries missing at the
	// end of the drain.
	Behind []string `json:"behind,omitempty"`
	Notes  []string `json:"notes"`
}

// Shape is one run of a ShapeReport.
type Shape struct {
	Name            string  `json:"name"`
	Endpoints       int     `json:"endpoints"`
	ReceiverDelayMS float64 `json:"receiver_delay_ms"`
	Report          *Report `json:"report"`
}

// CheckShapes refuses shapes a run cannot have, and options --shape does
// not combine with.
func CheckShapes(o Options, endpoints []int, delays []time.Duration) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(endpoints) == 0 || len(delays) == 0 {
		bad("--shape needs at least one number of endpoints and one receiver delay")
	}
	if n := len(endpoints) * len(delays); n > MaxShapes {
		bad("--shape-endpoints × --shape-delays is %d runs, more than %d", n, MaxShapes)
	}
	for _, n := range endpoints {
		if n < 1 || n > MaxEndpoints {
			bad("--shape-endpoints: each must be from 1 to %d, not %d", MaxEndpoints, n)
		}
	}
	for _, d := range delays {
		if d < 0 || d > MaxReceiverDelay {
			bad("--shape-delays: each must be from 0 to %s, not %s", MaxReceiverDelay, d)
		}
	}
	if o.Fanout > 1 || o.Consumers > 0 {
		bad("--shape spreads each event to one endpoint of its own consumer: leave --fanout and --consumers out")
	}
	if o.Soak > 0 || o.Idle > 0 || o.IdleEndpoints > 0 {
		bad("--shape does not combine with --soak, --idle or --idle-endpoints")
	}
	if o.Endpoints != 0 || o.ReceiverDelay != 0 {
		bad("--shape sets --endpoints and --receiver-delay itself (--shape-endpoints, --shape-delays)")
	}
	return errors.Join(errs...)
}

// RunShapes runs o once for each number of endpoints and each receiver
// delay, one after the other, each with a Herald of its own (on SQLite a
// fresh file each; a --db is shared by them all).
func RunShapes(ctx context.Context, o Options, endpoints []int, delays []time.Duration) (*ShapeReport, error) {
	if err := CheckShapes(o, endpoints, delays); err != nil {
		return nil, err
	}
	sr := &ShapeReport{Notes: []string{noteShapes}}
	if o.DB != "" || o.Server != "" {
		sr.Notes = append(sr.Notes, noteShapesShared)
	}
	total := len(endpoints) * len(delays)
	for _, n := range endpoints {
		for _, d := range delays {
			s := Shape{Name: shapeName(n, d), Endpoints: n, ReceiverDelayMS: float64(d) / float64(time.Millisecond)}
			if o.Progress != nil {
				fmt.Fprintf(o.Progress, "shape %d of %d: %s\n", len(sr.Shapes)+1, total, s.Name)
			}
			run := o
			run.Endpoints, run.ReceiverDelay = n, d
			rep, err := Run(ctx, run)
			s.Report = rep
			if rep != nil {
				sr.Shapes = append(sr.Shapes, s)
			}
			if err != nil {
				sr.sum()
				return sr, fmt.Errorf("shape %s: %w", s.Name, err)
			}
		}
	}
	sr.sum()
	return sr, nil
}

// shapeName is how a shape is named in the report: "100 endpoints, 250ms".
func shapeName(n int, d time.Duration) string {
	recv := "at once"
	if d > 0 {
		recv = d.String()
	}
	return plural(n, "endpoint") + ", " + recv
}

// sum finds the best and worst p99 and the shapes that fell behind.
func (sr *ShapeReport) sum() {
	sr.BestP99MS, sr.WorstP99MS, sr.P99Ratio, sr.Behind = 0, 0, 0, nil
	first := true
	for _, s := range sr.Shapes {
		r := s.Report
		if r.Deliveries.Missing > 0 || r.Interrupted {
			sr.Behind = append(sr.Behind, s.Name)
		}
		if r.LatencyMS.Samples == 0 {
			continue
		}
		p99 := r.LatencyMS.P99
		if first || p99 < sr.BestP99MS {
			sr.BestP99MS = p99
		}
		if first || p99 > sr.WorstP99MS {
			sr.WorstP99MS = p99
		}
		first = false
	}
	if sr.BestP99MS > 0 {
		sr.P99Ratio = sr.WorstP99MS / sr.BestP99MS
	}
}

const (
	noteShapes       = "each shape is the same load (--rate, --duration or --events, --batch, --connections) spread over its endpoints, one run each, one after the other; latency is from the ingest answer to the arrival, so a slow receiver's answer time is not in it"
	noteShapesShared = "the shapes shared one database (--db or --server): each later shape ran beside the endpoints and history of the earlier ones"
)

// WriteText writes the shapes as a table, one row each, then the p99
// spread and the shapes that fell behind.
func (sr *ShapeReport) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "shape\tdeliveries/s\tp50 ms\tp99 ms\tmissing\tCPU ms/delivery\tWAL bytes/delivery\t")
	for _, s := range sr.Shapes {
		r := s.Report
		cpu, wal := "-", "-"
		if h := r.Herald; h.CPUMSPerDelivery != nil {
			cpu = num(*h.CPUMSPerDelivery)
		}
		if h := r.Herald; h.WALBytesPerDelivery != nil {
			wal = strconv.FormatFloat(*h.WALBytesPerDelivery, 'f', 0, 64)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t\n", s.Name, num(r.Deliveries.PerSecond),
			num(r.LatencyMS.P50), num(r.LatencyMS.P99), r.Deliveries.Missing, cpu, wal)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if sr.BestP99MS > 0 {
		fmt.Fprintf(w, "\np99 from %s to %s ms: the worst shape's is %sx the best's\n", num(sr.BestP99MS), num(sr.WorstP99MS), num(sr.P99Ratio))
	}
	for _, b := range sr.Behind {
		fmt.Fprintf(w, "fell behind: %s\n", b)
	}
	fmt.Fprintln(w)
	for _, n := range sr.Notes {
		if _, err := fmt.Fprintf(w, "note: %s\n", n); err != nil {
			return err
		}
	}
	return nil
}
