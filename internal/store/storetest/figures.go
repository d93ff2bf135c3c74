package storetest

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

func figuresCases() []testCase {
	return []testCase{
		{"EachFigureOfEachEndpointAsked", testFiguresEach},
		{"CountsStopAtTheLimit", testFiguresLimit},
		{"ListSortedByEachOrder", testEndpointListSorts},
	}
}

// figures reads the figures of ids at now.
func figures(t *testing.T, s store.Store, now time.Time, ids ...string) map[string]*herald.EndpointHealth {
	t.Helper()
	got, err := s.EndpointFigures(t.Context(), &store.EndpointFiguresParams{IDs: ids, Now: now})
	require.NoError(t, err)
	return got
}

// testFiguresEach sets endpoints in known states and reads them together:
// a (one delivered, one dead, a retry due, a retry to come, a new one
// due), b (a lease running), c (a lease expired: due again), d (disabled:
// its live deliveries went dead), a deleted endpoint and an unknown id.
func testFiguresEach(t *testing.T, s store.Store) {
	a := createEndpoint(t, s, quietEndpoint("a"), at(0))
	b := createEndpoint(t, s, quietEndpoint("b"), at(0))
	short := quietEndpoint("c")
	short.Timeout = time.Second // a lease of 2 × 1 s + the margin
	c := createEndpoint(t, s, short, at(0))
	d := createEndpoint(t, s, quietEndpoint("d"), at(0))
	gone := createEndpoint(t, s, quietEndpoint("e"), at(0))

	as := ingestN(t, s, at(0), a, 4)
	ingestFor(t, s, at(0), b)
	ingestFor(t, s, at(0), c)
	byID := claimAll(t, s, at(0))
	require.Len(t, byID, 6)
	t1 := at(time.Second)
	retrySoon := outcome(byID[as[2]], herald.StatusPending, t1)
	retrySoon.RetryIn = 10 * time.Second
	retryLater := outcome(byID[as[3]], herald.StatusPending, t1)
	retryLater.RetryIn = time.Hour
	require.Equal(t, []bool{true, true, true, true}, complete(t, s, t1,
		outcome(byID[as[0]], herald.StatusDelivered, t1),
		outcome(byID[as[1]], herald.StatusDead, t1),
		retrySoon, retryLater))
	ingestFor(t, s, at(2*time.Second), a)
	ingestN(t, s, at(2*time.Second), d, 2)
	disableEndpoint(t, s, d.ID, at(3*time.Second))
	require.NoError(t, s.EndpointDelete(t.Context(), &store.EndpointDeleteParams{ID: gone.ID, Now: at(3 * time.Second)}))

	now := at(20 * time.Second)
	got := figures(t, s, now, a.ID, b.ID, c.ID, d.ID, gone.ID, "ep_00000000000000000000000000")
	require.Len(t, got, 4, "a deleted endpoint and an unknown id are left out")

	ha := got[a.ID]
	require.Equal(t, 4, ha.Attempts1h)
	require.NotNil(t, ha.SuccessRate1h)
	require.InDelta(t, 0.25, *ha.SuccessRate1h, 1e-9)
	require.Equal(t, 0, ha.InFlight)
	require.Equal(t, 2, ha.Due, "the retry due and the new delivery; not the retry in an hour")
	require.Equal(t, 1, ha.Dead)
	// The health comes as kept: three failures after the success.
	require.Equal(t, herald.BreakerClosed, ha.BreakerState)
	require.Equal(t, 3, ha.ConsecutiveFailures)
	requireTimePtr(t, t1, ha.LastSuccessAt)

	hb := got[b.ID]
	require.Equal(t, 1, hb.InFlight, "its lease runs until 27 s")
	require.Zero(t, hb.Due)
	require.Zero(t, hb.Dead)
	require.Zero(t, hb.Attempts1h)
	require.Nil(t, hb.SuccessRate1h)

	hc := got[c.ID]
	require.Zero(t, hc.InFlight, "its lease ran out at 9 s")
	require.Equal(t, 1, hc.Due, "an expired lease is due again")

	hd := got[d.ID]
	require.Equal(t, 2, hd.Dead)
	require.Zero(t, hd.Due)
	require.Zero(t, hd.InFlight)

	// Two hours on: the hour has no attempts, the retry in an hour is due,
	// b's lease is long over.
	later := figures(t, s, at(2*time.Hour), a.ID, b.ID)
	require.Zero(t, later[a.ID].Attempts1h)
	require.Nil(t, later[a.ID].SuccessRate1h)
	require.Equal(t, 3, later[a.ID].Due)
	require.Zero(t, later[b.ID].InFlight)
	require.Equal(t, 1, later[b.ID].Due)

	require.Empty(t, figures(t, s, now))
}

// testFiguresLimit: a figure past the limit reads as the limit (due,
// retries and new deliveries together; the hour's attempts; dead), and one
// below it exactly.
func testFiguresLimit(t *testing.T, s store.Store) {
	const limit = 4
	read := func(now time.Time, id string) *herald.EndpointHealth {
		t.Helper()
		got, err := s.EndpointFigures(t.Context(), &store.EndpointFiguresParams{IDs: []string{id}, Now: now, Limit: limit})
		require.NoError(t, err)
		return got[id]
	}
	ep := createEndpoint(t, s, quietEndpoint("c"), at(0))
	small := createEndpoint(t, s, quietEndpoint("s"), at(0))
	ids := ingestN(t, s, at(0), ep, 3)
	ingestN(t, s, at(0), small, limit-1)
	byID := claimAll(t, s, at(0))
	for _, id := range ids {
		fail(t, s, at(time.Second), byID[id], time.Second)
	}
	ingestN(t, s, at(time.Second), ep, 3)
	got := read(at(5*time.Second), ep.ID)
	require.Equal(t, limit, got.Due, "3 retries and 3 new deliveries due")
	require.Equal(t, 3, got.Attempts1h)

	byID = claimAll(t, s, at(5*time.Second))
	for _, c := range byID {
		if c.Endpoint.ID == ep.ID {
			fail(t, s, at(6*time.Second), c, time.Hour)
		}
	}
	got = read(at(7*time.Second), ep.ID)
	require.Equal(t, limit, got.Attempts1h, "9 attempts in the hour")
	require.NotNil(t, got.SuccessRate1h)
	require.Zero(t, *got.SuccessRate1h)

	disableEndpoint(t, s, ep.ID, at(8*time.Second))
	disableEndpoint(t, s, small.ID, at(8*time.Second))
	got = read(at(9*time.Second), ep.ID)
	require.Zero(t, got.Due)
	require.Equal(t, limit, got.Dead, "6 dead")
	require.Equal(t, limit-1, read(at(9*time.Second), small.ID).Dead)
}

// testEndpointListSorts walks every order of an endpoint list by a
// column (the ranked ones are sort.go's), a page of
// two at a time, with and without a consumer filter, and compares it with
// the order worked out here: byte order of the key, ties by id in the
// same direction.
func testEndpointListSorts(t *testing.T, s store.Store) {
	specs := []struct{ consumer, url string }{
		{"b", "https://z.example.com/"},
		{"a", "https://m.example.com/"},
		{"B", "https://A.example.com/"},
		{"b", "https://m.example.com/"},
		{"a", "https://a.example.com/x"},
		{"c", "https://m.example.com/"},
		{"b", "https://a.example.com/"},
	}
	var all []*herald.Endpoint
	for i, sp := range specs {
		ep := quietEndpoint(sp.consumer)
		ep.URL = sp.url
		all = append(all, createEndpoint(t, s, ep, at(time.Duration(i)*time.Second)))
	}
	gone := createEndpoint(t, s, quietEndpoint("b"), at(time.Minute))
	require.NoError(t, s.EndpointDelete(t.Context(), &store.EndpointDeleteParams{ID: gone.ID, Now: at(time.Minute)}))

	for _, sort := range store.EndpointSorts() {
		if sort.Ranked() {
			continue // sort.go
		}
		for _, consumer := range []string{"", "b"} {
			t.Run(fmt.Sprintf("%s/consumer=%s", sort, consumer), func(t *testing.T) {
				var want []string
				var eps []*herald.Endpoint
				for _, ep := range all {
					if consumer == "" || ep.ConsumerID == consumer {
						eps = append(eps, ep)
					}
				}
				key, desc := sort.Key()
				slices.SortFunc(eps, func(x, y *herald.Endpoint) int {
					kx, ky := x.ID, y.ID
					switch key {
					case "consumer":
						kx, ky = x.ConsumerID, y.ConsumerID
					case "url":
						kx, ky = x.URL, y.URL
					}
					c := bytes.Compare([]byte(kx), []byte(ky))
					if c == 0 {
						c = bytes.Compare([]byte(x.ID), []byte(y.ID))
					}
					if desc {
						c = -c
					}
					return c
				})
				for _, ep := range eps {
					want = append(want, ep.ID)
				}
				got := collect(t, 2, func(ep *herald.Endpoint) string { return ep.ID }, func(cursor string) (*store.Page[*herald.Endpoint], error) {
					return s.EndpointList(t.Context(), &store.EndpointListParams{ConsumerID: consumer, Sort: sort, Cursor: cursor, Limit: 2})
				})
				require.Equal(t, want, got)
			})
		}
	}
	_, err := s.EndpointList(t.Context(), &store.EndpointListParams{Sort: store.EndpointSortURL, Cursor: "not a cursor"})
	require.ErrorIs(t, err, store.ErrInvalidCursor)
}
