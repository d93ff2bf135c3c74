package bench

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSeries(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 23, 22, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	for _, tc := range []struct {
		name     string
		windows  int
		arrivals []arrival
		want     []WindowStats
	}{
		{
			name:    "EachMinuteItsOwnDeliveries",
			windows: 3,
			arrivals: []arrival{
				{0, 1 * ms}, {30 * time.Second, 2 * ms}, {59 * time.Second, 3 * ms},
				{time.Minute, 10 * ms}, {90 * time.Second, 20 * ms},
				{2*time.Minute + time.Second, 5 * ms},
			},
			want: []WindowStats{
				{Deliveries: 3, P50: 2 * ms, P99: 3 * ms},
				{Deliveries: 2, P50: 10 * ms, P99: 20 * ms},
				{Deliveries: 1, P50: 5 * ms, P99: 5 * ms},
			},
		},
		{
			name:    "AMinuteWithoutDeliveries",
			windows: 3,
			arrivals: []arrival{
				{time.Second, 4 * ms}, {2*time.Minute + time.Second, 6 * ms},
			},
			want: []WindowStats{
				{Deliveries: 1, P50: 4 * ms, P99: 4 * ms},
				{},
				{Deliveries: 1, P50: 6 * ms, P99: 6 * ms},
			},
		},
		{
			name:    "DrainArrivalsGoToTheLastMinute",
			windows: 2,
			arrivals: []arrival{
				{-time.Second, 1 * ms}, // before the start: the first minute
				{time.Minute, 2 * ms},
				{10 * time.Minute, 30 * ms}, // while draining: the last minute
			},
			want: []WindowStats{
				{Deliveries: 1, P50: 1 * ms, P99: 1 * ms},
				{Deliveries: 2, P50: 2 * ms, P99: 30 * ms},
			},
		},
		{
			name:     "HundredDeliveriesP99IsTheNinetyNinth",
			windows:  1,
			arrivals: hundredArrivals(),
			want:     []WindowStats{{Deliveries: 100, P50: 50 * ms, P99: 99 * ms}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := NewSeries(t0, time.Minute, tc.windows)
			for _, a := range tc.arrivals {
				s.Add(t0.Add(a.at), a.lat)
			}
			var got []WindowStats
			for i := range s.Windows() {
				got = append(got, s.Close(i))
			}
			require.Equal(t, tc.want, got)
			require.Zero(t, s.Late())
		})
	}
	t.Run("ArrivalsForAClosedWindowAreLate", func(t *testing.T) {
		t.Parallel()
		s := NewSeries(t0, time.Minute, 2)
		s.Add(t0.Add(time.Second), ms)
		require.Equal(t, 1, s.Close(0).Deliveries)
		s.Add(t0.Add(2*time.Second), ms)
		s.Add(t0.Add(61*time.Second), ms)
		require.Equal(t, int64(1), s.Late())
		require.Equal(t, 1, s.Close(1).Deliveries)
	})
}

// arrival is a delivery for TestSeries: when it arrived, after the
// series' start, and its latency.
type arrival struct {
	at  time.Duration
	lat time.Duration
}

func hundredArrivals() []arrival {
	out := make([]arrival, 100)
	for i := range out {
		// Out of order: the window sorts them.
		out[i].at, out[i].lat = time.Second, time.Duration(100-i)*time.Millisecond
	}
	return out
}

func TestTallyFeedsTheSeries(t *testing.T) {
	t.Parallel()
	tl := NewTally(4)
	t0 := time.Now()
	s := NewSeries(t0, time.Minute, 2)
	tl.track(s)
	tl.Accepted("evt_a#0", t0.Add(time.Second))
	tl.Arrived("evt_a#0", t0.Add(time.Second+3*time.Millisecond))
	tl.Arrived("evt_a#0", t0.Add(61*time.Second)) // a repeat: not a second delivery
	tl.Arrived("evt_b#0", t0.Add(70*time.Second)) // before its accept: latency 0
	tl.Accepted("evt_b#0", t0.Add(71*time.Second))
	tl.Arrived("evt_stray#0", t0.Add(72*time.Second)) // never accepted
	tl.Accepted("evt_c#0", t0.Add(73*time.Second))    // never arrived
	require.Equal(t, WindowStats{Deliveries: 1, P50: 3 * time.Millisecond, P99: 3 * time.Millisecond}, s.Close(0))
	require.Equal(t, WindowStats{Deliveries: 1}, s.Close(1))
}

func TestP99Ratio(t *testing.T) {
	t.Parallel()
	row := func(n int, p99 float64) SoakRow { return SoakRow{Deliveries: n, P99MS: p99} }
	for _, tc := range []struct {
		name string
		rows []SoakRow
		want float64
		ok   bool
	}{
		{"Flat", []SoakRow{row(10, 8), row(10, 9), row(10, 8)}, 1, true},
		{"Doubled", []SoakRow{row(10, 5), row(10, 7), row(10, 10)}, 2, true},
		{"EmptyRowsPassedOver", []SoakRow{row(0, 0), row(10, 4), row(10, 6), row(0, 0)}, 1.5, true},
		{"OneRow", []SoakRow{row(10, 4)}, 0, false},
		{"None", nil, 0, false},
		{"FirstP99Zero", []SoakRow{row(10, 0), row(10, 3)}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := P99Ratio(tc.rows)
			require.Equal(t, tc.ok, ok)
			require.InDelta(t, tc.want, got, 1e-9)
		})
	}
}

func TestSoakText(t *testing.T) {
	t.Parallel()
	t.Run("PostgreSQL", func(t *testing.T) {
		t.Parallel()
		r := SoakRow{Minute: 2, Deliveries: 60000, P50MS: 3.2, P99MS: 8.1, Tables: []TableRows{
			{Name: "deliveries", Rows: 120000, Dead: ptr(int64(5000))},
			{Name: "events", Rows: 120000, Dead: ptr(int64(0))},
		}}
		require.Equal(t, "2: 60000 delivered, p50 3.20 ms, p99 8.10 ms; deliveries 120000/5000, events 120000/0", r.line())
		var b bytes.Buffer
		writeSoak(&b, &SoakReport{EverySeconds: 60, Tables: "rows/dead", Rows: []SoakRow{r}})
		require.Contains(t, b.String(), "soak, a row every 1m0s")
		require.Regexp(t, `(?m)^minute\s+delivered\s+p50\s+p99\s+deliveries\s+events$`, b.String())
		require.Regexp(t, `(?m)^2\s+60000\s+3.20 ms\s+8.10 ms\s+120000/5000\s+120000/0$`, b.String())
		require.Contains(t, b.String(), "p99 of the last row over the first: not known")
	})
	t.Run("SQLite", func(t *testing.T) {
		t.Parallel()
		r := SoakRow{Minute: 1, Deliveries: 5, P50MS: 1, P99MS: 2, Tables: []TableRows{{Name: "deliveries", Rows: 5}},
			FreelistPages: ptr(int64(12)), Pages: ptr(int64(900))}
		require.Equal(t, "1: 5 delivered, p50 1.00 ms, p99 2.00 ms; deliveries 5; free 12 of 900 pages", r.line())
		var b bytes.Buffer
		writeSoak(&b, &SoakReport{EverySeconds: 10, Rows: []SoakRow{r, r}, P99Ratio: ptr(1.0)})
		require.Regexp(t, `(?m)^row\s+delivered\s+p50\s+p99\s+deliveries\s+free pages$`, b.String())
		require.Regexp(t, `(?m)^1\s+5\s+1.00 ms\s+2.00 ms\s+5\s+12/900$`, b.String())
		require.Contains(t, b.String(), "p99 of the last row over the first: 1.00")
	})
}
