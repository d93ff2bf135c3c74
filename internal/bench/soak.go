package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// Series sorts delivery latencies into windows of equal length by the
// time each delivery arrived, for a soak's rows. Window i holds arrivals
// from start + i×every to start + (i+1)×every; an arrival before start
// counts in the first window, one after the last window (while draining)
// in the last. Once a window is closed its latencies are dropped, so it
// holds at most one window's worth.
type Series struct {
	start time.Time
	every time.Duration

	mu      sync.Mutex
	windows [][]time.Duration
	closed  []bool
	// late counts arrivals for a window already closed.
	late int64
}

// NewSeries returns n empty windows of length every from start.
func NewSeries(start time.Time, every time.Duration, n int) *Series {
	return &Series{start: start, every: every, windows: make([][]time.Duration, n), closed: make([]bool, n)}
}

// Windows says how many windows s has.
func (s *Series) Windows() int { return len(s.windows) }

// index is the window of an arrival at.
func (s *Series) index(at time.Time) int {
	i := int(at.Sub(s.start) / s.every)
	return min(max(i, 0), len(s.windows)-1)
}

// Add records a delivery that arrived at arrived after latency.
func (s *Series) Add(arrived time.Time, latency time.Duration) {
	i := s.index(arrived)
	s.mu.Lock()
	if s.closed[i] {
		s.late++
	} else {
		s.windows[i] = append(s.windows[i], latency)
	}
	s.mu.Unlock()
}

// WindowStats summarizes one window.
type WindowStats struct {
	Deliveries int
	P50, P99   time.Duration
}

// Close summarizes window i and drops its latencies; arrivals for it
// after this count as late.
func (s *Series) Close(i int) WindowStats {
	s.mu.Lock()
	lat := s.windows[i]
	s.windows[i], s.closed[i] = nil, true
	s.mu.Unlock()
	slices.Sort(lat)
	return WindowStats{Deliveries: len(lat), P50: Percentile(lat, 0.50), P99: Percentile(lat, 0.99)}
}

// Late says how many arrivals came for windows already closed.
func (s *Series) Late() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.late
}

// P99Ratio is the last row's p99 over the first row's, the drift of a
// soak's tail latency: near 1 when nothing accumulates. Rows without
// deliveries are passed over; false when there are not two rows with
// deliveries or the first p99 is 0.
func P99Ratio(rows []SoakRow) (float64, bool) {
	var first, last *SoakRow
	for i := range rows {
		if rows[i].Deliveries == 0 {
			continue
		}
		if first == nil {
			first = &rows[i]
		}
		last = &rows[i]
	}
	if first == nil || first == last || first.P99MS == 0 {
		return 0, false
	}
	return last.P99MS / first.P99MS, true
}

// soakGrace is how long after a window ends its row is made: a delivery
// that arrived just before the end may still be on its way into the
// tally (an arrival whose ingest answer is still being read, say).
const soakGrace = time.Second

// soaker makes the rows of a soak while the load runs.
type soaker struct {
	r      *run
	series *Series
	rows   []SoakRow
	next   int // the next window to close
	done   chan struct{}
	wg     sync.WaitGroup
}

// startSoak starts making a row at each window's end (plus soakGrace)
// but the last, which finish makes once the deliveries have drained.
func (r *run) startSoak(start time.Time) *soaker {
	o := r.o
	n := int((o.Soak + o.SoakEvery - 1) / o.SoakEvery)
	s := &soaker{r: r, series: NewSeries(start, o.SoakEvery, n), done: make(chan struct{})}
	r.tally.track(s.series)
	if w := o.Progress; w != nil {
		fmt.Fprintf(w, "bench: soak for %s, a row every %s: %s\n", o.Soak, o.SoakEvery, r.soakHeader())
	}
	s.wg.Go(func() {
		timer := time.NewTimer(time.Until(start.Add(o.SoakEvery + soakGrace)))
		defer timer.Stop()
		for s.next < n-1 {
			select {
			case <-s.done:
				return
			case <-timer.C:
			}
			s.row(context.Background())
			timer.Reset(time.Until(start.Add(time.Duration(s.next+1)*o.SoakEvery + soakGrace)))
		}
	})
	return s
}

// row closes the next window and reads the tables.
func (s *soaker) row(ctx context.Context) {
	i := s.next
	s.next++
	w := s.series.Close(i)
	row := SoakRow{Minute: i + 1, Deliveries: w.Deliveries, P50MS: millis(w.P50), P99MS: millis(w.P99)}
	if p := s.r.probe; p != nil {
		st, err := p.tables(ctx)
		if err != nil {
			row.TablesError = err.Error()
		} else {
			row.Tables, row.FreelistPages, row.Pages = st.tables, st.freelist, st.pages
		}
	}
	s.rows = append(s.rows, row)
	if w := s.r.o.Progress; w != nil {
		fmt.Fprintf(w, "bench: soak %s %s\n", rowLabel(s.r.o.SoakEvery), row.line())
	}
}

// finish stops the timer and makes the rows not made yet (the last, or
// every one left when the run was cut short), and returns the soak's part
// of the report.
func (s *soaker) finish(ctx context.Context) *SoakReport {
	close(s.done)
	s.wg.Wait()
	// Rows up to the window of now: all of them after a whole soak, the
	// ones begun before an interrupt otherwise.
	for s.next <= s.series.index(time.Now()) {
		s.row(context.WithoutCancel(ctx))
	}
	rep := &SoakReport{
		EverySeconds: s.r.o.SoakEvery.Seconds(), Tables: s.r.soakHeader(),
		Rows: s.rows, LateDeliveries: s.series.Late(),
	}
	if v, ok := P99Ratio(s.rows); ok {
		rep.P99Ratio = ptr(v)
	}
	return rep
}

// soakHeader says what a soak row's table columns mean for this run's
// database.
func (r *run) soakHeader() string {
	switch {
	case r.probe == nil:
		return "latency and deliveries only (the bench reads the tables of a Herald it spawned)"
	case r.probe.pg != nil:
		return "hot tables as rows/dead, n_live_tup/n_dead_tup from pg_stat_user_tables (the statistics lag by up to ~10 s)"
	default:
		return "hot tables as rows, count(*); free = the SQLite file's freelist pages (PRAGMA freelist_count) of its page_count: pages that deleted rows left empty, reused before the file grows"
	}
}

// rowLabel names a soak row: a minute, unless --soak-every says otherwise.
func rowLabel(every time.Duration) string {
	if every == time.Minute {
		return "minute"
	}
	return "row"
}

// line is the row as one line: the progress line while the soak runs.
func (r SoakRow) line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d: %d delivered, p50 %s, p99 %s", r.Minute, r.Deliveries, ms(r.P50MS), ms(r.P99MS))
	if len(r.Tables) > 0 {
		b.WriteString("; ")
		for i, t := range r.Tables {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(t.Name + " " + t.cell())
		}
	}
	if r.FreelistPages != nil {
		fmt.Fprintf(&b, "; free %d of %d pages", *r.FreelistPages, deref(r.Pages))
	}
	if r.TablesError != "" {
		b.WriteString("; tables: " + r.TablesError)
	}
	return b.String()
}

func (t TableRows) cell() string {
	if t.Dead != nil {
		return fmt.Sprintf("%d/%d", t.Rows, *t.Dead)
	}
	return fmt.Sprint(t.Rows)
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// writeSoak writes the soak's rows as a table.
func writeSoak(w io.Writer, s *SoakReport) {
	every := time.Duration(s.EverySeconds * float64(time.Second))
	fmt.Fprintf(w, "\nsoak, a row every %s: deliveries that arrived in it (delivered) and their latency; %s\n", every, s.Tables)
	var names []string
	for _, r := range s.Rows {
		for _, t := range r.Tables {
			if !slices.Contains(names, t.Name) {
				names = append(names, t.Name)
			}
		}
	}
	head := []string{rowLabel(every), "delivered", "p50", "p99"}
	head = append(head, names...)
	free := slices.ContainsFunc(s.Rows, func(r SoakRow) bool { return r.FreelistPages != nil })
	if free {
		head = append(head, "free pages")
	}
	rows := [][]string{head}
	for _, r := range s.Rows {
		cells := []string{fmt.Sprint(r.Minute), fmt.Sprint(r.Deliveries), ms(r.P50MS), ms(r.P99MS)}
		for _, name := range names {
			cell := "-"
			for _, t := range r.Tables {
				if t.Name == name {
					cell = t.cell()
				}
			}
			cells = append(cells, cell)
		}
		if free {
			cell := "-"
			if r.FreelistPages != nil {
				cell = fmt.Sprintf("%d/%d", *r.FreelistPages, deref(r.Pages))
			}
			cells = append(cells, cell)
		}
		if r.TablesError != "" {
			cells = append(cells, "tables: "+r.TablesError)
		}
		rows = append(rows, cells)
	}
	writeColumns(w, rows)
	ratio := "not known (fewer than two rows with deliveries)"
	if s.P99Ratio != nil {
		ratio = num(*s.P99Ratio)
	}
	fmt.Fprintf(w, "p99 of the last row over the first: %s\n", ratio)
	if s.LateDeliveries > 0 {
		fmt.Fprintf(w, "%d deliveries were recorded after their row was made and are in no row\n", s.LateDeliveries)
	}
}

// writeColumns writes rows as left-aligned columns two spaces apart.
func writeColumns(w io.Writer, rows [][]string) {
	var width []int
	for _, r := range rows {
		for i, c := range r {
			if i == len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", width[i]-len([]rune(c))+2))
			}
		}
		fmt.Fprintln(w, b.String())
	}
}
