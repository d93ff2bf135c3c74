package storetest

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

func sortCases() []testCase {
	return []testCase{
		{"RankedOrdersFollowTheFigures", testRankedOrders},
		{"DeadOrderFollowsDeliveriesInAndOutOfDead", testDeadOrderFollows},
		{"HealthOrderFollowsFailuresAndTheHour", testHealthOrderFollows},
		{"RankedCursorsAreChecked", testRankedCursors},
	}
}

// sortEndpoint creates an endpoint of consumer that takes the event type
// name + ".x" alone, made at Base less back (so that ids follow creation).
func sortEndpoint(t *testing.T, s store.Store, consumer, name string, back time.Duration) *herald.Endpoint {
	t.Helper()
	return createEndpoint(t, s, newEndpoint(consumer, name+".*"), at(-back))
}

// ingestTo ingests n events of type name + ".x" for ep at now and returns
// their deliveries, all to ep.
func ingestTo(t *testing.T, s store.Store, now time.Time, ep *herald.Endpoint, name string, n int) []string {
	t.Helper()
	items := make([]store.EventIngestItem, n)
	for i := range items {
		items[i] = store.EventIngestItem{ConsumerID: ep.ConsumerID, EventType: name + ".x", Payload: fmt.Appendf(nil, `{"i":%d}`, i)}
	}
	var ids []string
	for _, res := range ingest(t, s, now, items...) {
		require.Len(t, res.Deliveries, 1)
		require.Equal(t, ep.ID, res.Deliveries[0].EndpointID)
		ids = append(ids, res.Deliveries[0].ID)
	}
	return ids
}

// listSorted walks the whole list in sort at now, limit a page.
func listSorted(t *testing.T, s store.Store, sort store.EndpointSort, consumer string, now time.Time, limit int) []string {
	t.Helper()
	return collect(t, limit, func(ep *herald.Endpoint) string { return ep.ID }, func(cursor string) (*store.Page[*herald.Endpoint], error) {
		return s.EndpointList(t.Context(), &store.EndpointListParams{
			ConsumerID: consumer, Sort: sort, Cursor: cursor, Limit: limit, Now: now,
		})
	})
}

// rankedWant works out the order of a ranked sort at now from what the
// store says of each endpoint one by one (EndpointGet, EndpointFigures),
// as store.EndpointSort describes it. dueMarks gives, for the order by
// due, each endpoint's oldest due time (those with work due now).
func rankedWant(t *testing.T, s store.Store, sort store.EndpointSort, consumer string, now time.Time, dueMarks map[string]time.Time) []string {
	t.Helper()
	page, err := s.EndpointList(t.Context(), &store.EndpointListParams{ConsumerID: consumer, Limit: store.MaxListLimit})
	require.NoError(t, err)
	require.Empty(t, page.NextCursor)
	all := page.Items
	type ranked struct {
		id   string
		rank int64
	}
	var rs []ranked
	for _, ep := range all {
		f := figures(t, s, now, ep.ID)[ep.ID]
		require.NotNil(t, f)
		var r int64
		switch key, _ := sort.Key(); key {
		case "dead":
			r = int64(f.Dead)
		case "due":
			r = store.RankNotDue
			if f.Due > 0 {
				mark, ok := dueMarks[ep.ID]
				require.True(t, ok, "endpoint %s has work due: its mark is given", ep.ID)
				r = mark.UnixMicro()
			}
		case "health":
			score, ok := herald.HealthScore(ep.Enabled, *f)
			failed := f.LastFailureAt != nil && f.LastFailureAt.After(now.Add(-time.Hour))
			switch {
			case !ep.Enabled || f.BreakerState == herald.BreakerOpen:
				r = 0
			case f.BreakerState == herald.BreakerHalfOpen || failed:
				r = store.RankNoScore
				if ok {
					r = int64(score)
				}
			default:
				r = store.RankHealthy
			}
		}
		rs = append(rs, ranked{ep.ID, r})
	}
	_, desc := sort.Key()
	slices.SortFunc(rs, func(a, b ranked) int {
		c := cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.id, b.id))
		if desc {
			return -c
		}
		return c
	})
	out := []string{}
	for _, r := range rs {
		out = append(out, r.id)
	}
	return out
}

// requireRanked requires that each ranked sort lists what rankedWant
// works out, in pages of 1, 2 and 50, with and without the consumer
// filter, and returns the orders listed for consumer "". Without
// dueMarks the order by due is left out.
func requireRanked(t *testing.T, s store.Store, now time.Time, dueMarks map[string]time.Time, consumers ...string) map[store.EndpointSort][]string {
	t.Helper()
	out := map[store.EndpointSort][]string{}
	for _, sort := range store.EndpointSorts() {
		if key, _ := sort.Key(); !sort.Ranked() || (key == "due" && dueMarks == nil) {
			continue
		}
		for _, consumer := range append([]string{""}, consumers...) {
			want := rankedWant(t, s, sort, consumer, now, dueMarks)
			for _, limit := range []int{1, 2, 50} {
				got := listSorted(t, s, sort, consumer, now, limit)
				require.Equal(t, want, got, "sort %s, consumer %q, pages of %d", sort, consumer, limit)
			}
			if consumer == "" {
				out[sort] = want
			}
		}
	}
	return out
}

// testRankedOrders sets endpoints of two consumers in known states and
// lists every ranked order: a1 delivered (healthy), a2 one delivered and
// one failed (score 50, a retry in an hour), a3 disabled (its live
// delivery dead), a4 two new deliveries due since 3 s, a5 five failures
// (breaker open), a6 a failure whose retry fell due at 5 s; b1 two dead
// (score 0, breaker closed), b2 idle, b3 one dead and a delivery due
// since 2 s.
func testRankedOrders(t *testing.T, s store.Store) {
	names := []struct{ consumer, name string }{
		{"a", "a1"}, {"a", "a2"}, {"a", "a3"}, {"a", "a4"}, {"a", "a5"}, {"a", "a6"},
		{"b", "b1"}, {"b", "b2"}, {"b", "b3"},
	}
	eps := map[string]*herald.Endpoint{}
	for i, n := range names {
		eps[n.name] = sortEndpoint(t, s, n.consumer, n.name, time.Duration(len(names)-i)*time.Second)
	}
	t0, t1 := at(0), at(time.Second)
	a1 := ingestTo(t, s, t0, eps["a1"], "a1", 1)
	a2 := ingestTo(t, s, t0, eps["a2"], "a2", 2)
	ingestTo(t, s, t0, eps["a3"], "a3", 1)
	a5 := ingestTo(t, s, t0, eps["a5"], "a5", 5)
	a6 := ingestTo(t, s, t0, eps["a6"], "a6", 1)
	b1 := ingestTo(t, s, t0, eps["b1"], "b1", 2)
	b3 := ingestTo(t, s, t0, eps["b3"], "b3", 1)
	leases := claimAll(t, s, t0)
	require.Len(t, leases, 13)
	retry := func(id string, in time.Duration) store.DeliveryOutcome {
		o := outcome(leases[id], herald.StatusPending, t1)
		o.RetryIn = in
		return o
	}
	outcomes := []store.DeliveryOutcome{
		outcome(leases[a1[0]], herald.StatusDelivered, t1),
		outcome(leases[a2[0]], herald.StatusDelivered, t1),
		retry(a2[1], time.Hour),
		retry(a6[0], 4*time.Second),
		outcome(leases[b1[0]], herald.StatusDead, t1),
		outcome(leases[b1[1]], herald.StatusDead, t1),
		outcome(leases[b3[0]], herald.StatusDead, t1),
	}
	for _, id := range a5 {
		outcomes = append(outcomes, retry(id, time.Hour))
	}
	for _, applied := range complete(t, s, t1, outcomes...) {
		require.True(t, applied)
	}
	disableEndpoint(t, s, eps["a3"].ID, at(2*time.Second))
	ingestTo(t, s, at(2*time.Second), eps["b3"], "b3", 1)
	ingestTo(t, s, at(3*time.Second), eps["a4"], "a4", 2)
	gone := sortEndpoint(t, s, "a", "gone", 0)
	ingestTo(t, s, at(0), gone, "gone", 1)
	require.NoError(t, s.EndpointDelete(t.Context(), &store.EndpointDeleteParams{ID: gone.ID, Now: at(3 * time.Second)}))

	now := at(10 * time.Second)
	require.Equal(t, herald.BreakerOpen, healthOf(t, s, eps["a5"].ID, now).BreakerState)
	// The queue's marks are the oldest due times once tidied; before, a6's
	// is where its first delivery was due (0 s), and a1's and a2's name
	// endpoints with nothing due now.
	_, err := s.EndpointQueueTidy(t.Context(), &store.EndpointQueueTidyParams{Now: now, Limit: store.TidyLimit})
	require.NoError(t, err)
	marks := map[string]time.Time{
		eps["b3"].ID: at(2 * time.Second),
		eps["a4"].ID: at(3 * time.Second),
		eps["a6"].ID: at(5 * time.Second),
	}
	got := requireRanked(t, s, now, marks, "a", "b")

	// The orders spelt out, so that the figures above are the ones meant.
	id := func(names ...string) []string {
		var out []string
		for _, n := range names {
			out = append(out, eps[n].ID)
		}
		return out
	}
	require.Equal(t, id("b3", "a4", "a6", "a1", "a2", "a3", "a5", "b1", "b2"), got[store.EndpointSortDue])
	require.Equal(t, id("b1", "b3", "a3", "b2", "a6", "a5", "a4", "a2", "a1"), got[store.EndpointSortDead])
	require.Equal(t, id("a3", "a5", "a6", "b1", "b3", "a2", "a1", "a4", "b2"), got[store.EndpointSortHealth])
	require.Equal(t, reversed(got[store.EndpointSortHealth]), got[store.EndpointSortHealthDesc])
}

// requireOrder requires sort to list want, in pages of 2, at now, after
// requireRanked has checked every order of consumers a and b against the
// figures.
func requireOrder(t *testing.T, s store.Store, sort store.EndpointSort, now time.Time, want ...*herald.Endpoint) {
	t.Helper()
	requireRanked(t, s, now, nil, "a", "b")
	var ids []string
	for _, ep := range want {
		ids = append(ids, ep.ID)
	}
	require.Equal(t, ids, listSorted(t, s, sort, "", now, 2))
}

// testDeadOrderFollows moves deliveries in and out of dead every way the
// store can (outcomes, a disable, replays, cancels, an endpoint's
// deletion, the purge) and requires the order by dead to follow each
// time.
func testDeadOrderFollows(t *testing.T, s store.Store) {
	x := sortEndpoint(t, s, "a", "x", 4*time.Second)
	y := sortEndpoint(t, s, "a", "y", 3*time.Second)
	z := sortEndpoint(t, s, "b", "z", 2*time.Second)
	w := sortEndpoint(t, s, "b", "w", time.Second)
	order := func(now time.Time, want ...*herald.Endpoint) {
		t.Helper()
		requireOrder(t, s, store.EndpointSortDead, now, want...)
	}
	order(at(0), w, z, y, x)

	// Outcomes: x two dead, y one.
	xs := ingestTo(t, s, at(0), x, "x", 2)
	ys := ingestTo(t, s, at(0), y, "y", 1)
	for _, c := range claimAll(t, s, at(0)) {
		finish(t, s, at(time.Second), c, herald.StatusDead)
	}
	order(at(time.Second), x, y, w, z)

	// A disable: z's two live deliveries go dead.
	ingestTo(t, s, at(2*time.Second), z, "z", 2)
	disableEndpoint(t, s, z.ID, at(2*time.Second))
	order(at(2*time.Second), z, x, y, w)

	// A replay of one of x's: x and y tie at 1, newest first.
	_, err := s.DeliveryReplay(t.Context(), &store.DeliveryReplayParams{ID: xs[0], Now: at(3 * time.Second)})
	require.NoError(t, err)
	order(at(3*time.Second), z, y, x, w)

	// A replay of all of y's, then a cancel of it: cancelled is not dead.
	n, err := s.DeliveryReplayMany(t.Context(), &store.DeliveryReplayManyParams{EndpointID: y.ID, Status: herald.StatusDead, Now: at(4 * time.Second)})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = s.DeliveryCancel(t.Context(), &store.DeliveryCancelParams{ID: ys[0], Now: at(4 * time.Second)})
	require.NoError(t, err)
	order(at(4*time.Second), z, x, w, y)

	// x's replayed delivery dies again; then x is deleted, and leaves the
	// list whatever its count.
	finish(t, s, at(5*time.Second), claimOne(t, s, at(5*time.Second), xs[0]), herald.StatusDead)
	order(at(5*time.Second), z, x, w, y)
	require.NoError(t, s.EndpointDelete(t.Context(), &store.EndpointDeleteParams{ID: x.ID, Now: at(6 * time.Second)}))
	order(at(6*time.Second), z, w, y)

	// The purge: every event has ended, so all go with their deliveries,
	// and with them the dead.
	purgePass(t, s, at(retention+time.Minute), 2)
	require.Empty(t, eventIDs(t, s))
	order(at(retention+time.Minute), w, z, y)
}

// testHealthOrderFollows requires the order by health to follow an
// endpoint failing, its breaker opening and closing, and the hour passing.
func testHealthOrderFollows(t *testing.T, s store.Store) {
	x := sortEndpoint(t, s, "a", "x", 3*time.Second)
	y := sortEndpoint(t, s, "a", "y", 2*time.Second)
	z := sortEndpoint(t, s, "b", "z", time.Second)
	order := func(now time.Time, want ...*herald.Endpoint) {
		t.Helper()
		requireOrder(t, s, store.EndpointSortHealth, now, want...)
	}
	order(at(0), x, y, z)

	// y fails once and delivers three times: 75, ahead of those that
	// failed nothing.
	ys := ingestTo(t, s, at(0), y, "y", 4)
	leases := claimAll(t, s, at(0))
	fail(t, s, at(time.Second), leases[ys[0]], time.Hour)
	for _, id := range ys[1:] {
		finish(t, s, at(time.Second), leases[id], herald.StatusDelivered)
	}
	order(at(time.Minute), y, x, z)

	// z fails five times: its breaker opens, 0.
	zs := ingestTo(t, s, at(2*time.Minute), z, "z", 5)
	leases = claimAll(t, s, at(2*time.Minute))
	for _, id := range zs {
		fail(t, s, at(2*time.Minute), leases[id], time.Second)
	}
	require.Equal(t, herald.BreakerOpen, healthOf(t, s, z.ID, at(2*time.Minute)).BreakerState)
	order(at(3*time.Minute), z, y, x)

	// Its probe, after the 5-minute cooldown, makes it half-open, still
	// ranked among the failing; the probe's success closes it, and its
	// score is its hour's: 1 success in 6.
	probe := claimN(t, s, at(8*time.Minute), 10, 1)[0]
	require.Equal(t, herald.BreakerHalfOpen, healthOf(t, s, z.ID, at(8*time.Minute)).BreakerState)
	order(at(8*time.Minute), z, y, x)
	finish(t, s, at(9*time.Minute), probe, herald.StatusDelivered)
	require.Equal(t, herald.BreakerClosed, healthOf(t, s, z.ID, at(9*time.Minute)).BreakerState)
	order(at(9*time.Minute), z, y, x)

	// An hour after their last failures, y and z failed nothing within
	// the hour: they go back among the rest, by id.
	order(at(2*time.Hour), x, y, z)
}

// testRankedCursors requires a ranked order to refuse a cursor it did not
// make, and to take its own.
func testRankedCursors(t *testing.T, s store.Store) {
	for i := range 3 {
		sortEndpoint(t, s, "a", fmt.Sprintf("e%d", i), time.Duration(3-i)*time.Second)
	}
	for _, sort := range []store.EndpointSort{store.EndpointSortHealth, store.EndpointSortHealthDesc, store.EndpointSortDue, store.EndpointSortDead} {
		for _, cursor := range []string{"ep_x", "not a cursor", store.SortCursor("a", "ep_x"), store.SortCursor("01", "ep_x")} {
			_, err := s.EndpointList(t.Context(), &store.EndpointListParams{Sort: sort, Cursor: cursor, Now: at(0)})
			require.ErrorIs(t, err, store.ErrInvalidCursor, "sort %s, cursor %q", sort, cursor)
		}
		page, err := s.EndpointList(t.Context(), &store.EndpointListParams{Sort: sort, Limit: 1, Now: at(0)})
		require.NoError(t, err)
		require.NotEmpty(t, page.NextCursor)
		_, err = s.EndpointList(t.Context(), &store.EndpointListParams{Sort: sort, Cursor: page.NextCursor, Now: at(0)})
		require.NoError(t, err)
	}
}
