package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

func fairnessCases() []testCase {
	return []testCase{
		{"BacklogDoesNotStarveAnotherEndpoint", testFairBacklog},
		{"LimitIsDealtOnePerEndpointPerRound", testFairRounds},
		{"NewDeliveriesBeforeRetries", testFairNewBeforeRetries},
	}
}

// countByEndpoint counts claimed deliveries per endpoint id.
func countByEndpoint(claimed []*store.ClaimedDelivery) map[string]int {
	n := map[string]int{}
	for _, c := range claimed {
		n[c.Endpoint.ID]++
	}
	return n
}

func testFairBacklog(t *testing.T, s store.Store) {
	big := quietEndpoint("a")
	big.MaxInFlight = 100
	a := createEndpoint(t, s, big, at(0))
	b := createEndpoint(t, s, quietEndpoint("b"), at(0))
	ingestN(t, s, at(0), a, 2000)
	lone := ingestFor(t, s, at(time.Second), b)

	claimed := claim(t, s, at(time.Minute), 8)
	counts := countByEndpoint(claimed)
	require.Equal(t, 1, counts[b.ID], "b's delivery is not starved")
	// a gets at least its round-robin share; a backend may also hand it
	// what b could not use.
	require.GreaterOrEqual(t, counts[a.ID], 4)
	require.LessOrEqual(t, len(claimed), 8)
	require.Equal(t, lone, claimed[len(claimed)-1].Delivery.ID, "oldest due first: b's came last")
}

func testFairRounds(t *testing.T, s store.Store) {
	var eps []*herald.Endpoint
	for _, consumer := range []string{"a", "b", "c"} {
		ep := createEndpoint(t, s, quietEndpoint(consumer), at(0))
		ingestN(t, s, at(0), ep, 5)
		eps = append(eps, ep)
	}
	claimed := claimN(t, s, at(time.Second), 6, 6)
	require.Equal(t, map[string]int{eps[0].ID: 2, eps[1].ID: 2, eps[2].ID: 2}, countByEndpoint(claimed))

	// Seven: one endpoint gets a third, whichever the deal began with.
	claimed = claimN(t, s, at(time.Second), 7, 7)
	counts := countByEndpoint(claimed)
	require.Len(t, counts, 3)
	for _, n := range counts {
		require.Contains(t, []int{2, 3}, n)
	}

	// Two are left, and a large claim takes both.
	claimN(t, s, at(time.Second), store.MaxListLimit, 15-13)
}

func testFairNewBeforeRetries(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, quietEndpoint("c"), at(0))
	retry := ingestFor(t, s, at(0), ep)
	fail(t, s, at(time.Second), claimOne(t, s, at(0), retry), time.Second) // due at 2 s
	fresh := ingestFor(t, s, at(10*time.Second), ep)

	// The retry has waited longer, but the new delivery goes first.
	first := claimN(t, s, at(20*time.Second), 1, 1)[0]
	require.Equal(t, fresh, first.Delivery.ID)
	second := claimN(t, s, at(20*time.Second), 1, 1)[0]
	require.Equal(t, retry, second.Delivery.ID)
	finish(t, s, at(21*time.Second), first, herald.StatusDelivered)

	// Claimed together, they come back oldest due first.
	fail(t, s, at(21*time.Second), second, 14*time.Second) // due at 35 s
	later := ingestFor(t, s, at(40*time.Second), ep)
	both := claimN(t, s, at(50*time.Second), 10, 2)
	require.Equal(t, []string{retry, later}, []string{both[0].Delivery.ID, both[1].Delivery.ID})
}
