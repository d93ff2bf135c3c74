package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

func fifoCases() []testCase {
	return []testCase{
		{"OneAtATimeInIngestOrder", testFIFOOrder},
		{"LostHeadGoesAgainBeforeTheNext", testFIFOLostHead},
		{"CancelledHeadReleasesTheNext", testFIFOCancelledHead},
		{"OtherEndpointsFlowBeside", testFIFOBeside},
	}
}

// fifoEndpoint is a quiet endpoint of consumer with FIFO ordering.
func fifoEndpoint(consumer string) *herald.Endpoint {
	ep := quietEndpoint(consumer)
	ep.Ordering = herald.OrderingFIFO
	return ep
}

func testFIFOOrder(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, fifoEndpoint("c"), at(0))
	require.Equal(t, herald.OrderingFIFO, ep.Ordering)
	ids := ingestN(t, s, at(0), ep, 3)

	// Only the head goes, and nothing while it is out.
	first := claimOne(t, s, at(0), ids[0])
	requireNoneDue(t, s, at(time.Second))

	// A head waiting for its retry holds the others back, though they are due.
	fail(t, s, at(2*time.Second), first, time.Minute)
	requireNoneDue(t, s, at(10*time.Second))
	requireNoneDue(t, s, at(62*time.Second-time.Microsecond))
	first = claimOne(t, s, at(62*time.Second), ids[0])
	require.Equal(t, 1, first.Delivery.AttemptCount)
	for _, id := range ids[1:] {
		require.Zero(t, requireStatus(t, s, id, herald.StatusPending).AttemptCount)
	}

	// A dead head releases the next.
	finish(t, s, at(63*time.Second), first, herald.StatusDead)
	second := claimOne(t, s, at(63*time.Second), ids[1])
	requireNoneDue(t, s, at(63*time.Second))
	finish(t, s, at(64*time.Second), second, herald.StatusDelivered)
	third := claimOne(t, s, at(64*time.Second), ids[2])
	finish(t, s, at(65*time.Second), third, herald.StatusDelivered)
	requireNoneDue(t, s, at(time.Hour))

	// Later events queue behind nothing now.
	later := ingestFor(t, s, at(2*time.Hour), ep)
	claimOne(t, s, at(2*time.Hour), later)
}

func testFIFOLostHead(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, fifoEndpoint("c"), at(0))
	ids := ingestN(t, s, at(0), ep, 2)
	lost := claimOne(t, s, at(0), ids[0])

	// Its node dies: once the lease has run out the head goes again,
	// still before the second.
	requireNoneDue(t, s, lost.LeaseExpiresAt.Add(-time.Microsecond))
	again := claimOne(t, s, lost.LeaseExpiresAt, ids[0])
	require.NotEqual(t, lost.LeaseToken, again.LeaseToken)
	requireNoneDue(t, s, lost.LeaseExpiresAt)
	finish(t, s, lost.LeaseExpiresAt.Add(time.Second), again, herald.StatusDelivered)
	claimOne(t, s, lost.LeaseExpiresAt.Add(time.Second), ids[1])
}

func testFIFOCancelledHead(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, fifoEndpoint("c"), at(0))
	ids := ingestN(t, s, at(0), ep, 3)
	head := claimOne(t, s, at(0), ids[0])
	fail(t, s, at(time.Second), head, time.Hour)

	_, err := s.DeliveryCancel(t.Context(), &store.DeliveryCancelParams{ID: ids[0], Now: at(2 * time.Second)})
	require.NoError(t, err)
	claimOne(t, s, at(2*time.Second), ids[1])

	// So does a head cancelled while its attempt is in flight.
	_, err = s.DeliveryCancel(t.Context(), &store.DeliveryCancelParams{ID: ids[1], Now: at(3 * time.Second)})
	require.NoError(t, err)
	claimOne(t, s, at(3*time.Second), ids[2])
}

func testFIFOBeside(t *testing.T, s store.Store) {
	fifo := createEndpoint(t, s, fifoEndpoint("a"), at(0))
	plain := createEndpoint(t, s, quietEndpoint("b"), at(0))
	ingestN(t, s, at(0), fifo, 5)
	ingestN(t, s, at(0), plain, 5)

	claimed := claimN(t, s, at(time.Second), store.MaxListLimit, 6)
	require.Equal(t, map[string]int{fifo.ID: 1, plain.ID: 5}, countByEndpoint(claimed))
}
