package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

func attemptCases() []testCase {
	return []testCase{
		{"ListOldestFirstWithPages", testAttemptList},
	}
}

func testAttemptList(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c", "order.*"), at(0))
	id := ingestFor(t, s, at(0), ep)
	other := ingestFor(t, s, at(0), ep)
	leases := claimAll(t, s, at(0))
	finish(t, s, at(time.Second), leases[other], herald.StatusDelivered)
	c := leases[id]
	now := at(0)
	for i := 1; i <= 5; i++ {
		o := outcome(c, herald.StatusPending, now)
		o.RetryIn = time.Minute
		o.Attempt.StatusCode = 500 + i
		require.Equal(t, i, o.Attempt.Number)
		now = now.Add(time.Second)
		require.Equal(t, []bool{true}, complete(t, s, now, o))
		now = now.Add(time.Minute)
		if i < 5 {
			c = claimOne(t, s, now, id)
		}
	}

	var got []*herald.Attempt
	ids := collect(t, 2, func(a *herald.Attempt) string { got = append(got, a); return a.ID }, func(cursor string) (*store.Page[*herald.Attempt], error) {
		return s.AttemptList(t.Context(), &store.AttemptListParams{DeliveryID: id, Cursor: cursor, Limit: 2})
	})
	require.Len(t, ids, 5)
	for i, a := range got {
		require.Equal(t, i+1, a.Number)
		require.Equal(t, 501+i, a.StatusCode)
		require.Equal(t, id, a.DeliveryID)
		require.Equal(t, ep.ID, a.EndpointID)
		requireTime(t, at(time.Duration(i)*(time.Minute+time.Second)), a.AttemptedAt)
	}

	page, err := s.AttemptList(t.Context(), &store.AttemptListParams{DeliveryID: id})
	require.NoError(t, err)
	require.Len(t, page.Items, 5, "a limit of 0 means the default")
	require.Empty(t, page.NextCursor)
	require.Len(t, attempts(t, s, other), 1)
}

func statsCases() []testCase {
	return []testCase{
		{"EmptyStoreHasEveryStatus", testStatsEmpty},
		{"CountsAndDueQueue", testStats},
		{"FilteredToOneConsumer", testStatsOneConsumer},
		{"QueueOnlyLeavesTheCountsOut", testStatsQueueOnly},
	}
}

var allStatuses = []herald.Status{
	herald.StatusPending, herald.StatusDelivering, herald.StatusDelivered, herald.StatusDead, herald.StatusCancelled,
}

func testStatsEmpty(t *testing.T, s store.Store) {
	st, err := s.Stats(t.Context(), &store.StatsParams{Now: at(0)})
	require.NoError(t, err)
	for _, status := range allStatuses {
		n, ok := st.ByStatus[status]
		require.True(t, ok, "status %s present", status)
		require.Zero(t, n)
	}
	require.Zero(t, st.DueNow)
	require.Zero(t, st.OldestDueAge)
	require.Zero(t, st.DeadLetters)
}

// testStatsQueueOnly: QueueOnly answers the due queue, the dead letters
// and the live deliveries by status as the full call does, without the
// counts of the finished ones.
func testStatsQueueOnly(t *testing.T, s store.Store) {
	mine := createEndpoint(t, s, newEndpoint("mine"), at(0))
	theirs := createEndpoint(t, s, newEndpoint("theirs"), at(0))
	var dead []string
	for _, ep := range []*herald.Endpoint{mine, theirs, theirs} {
		dead = append(dead, ingestFor(t, s, at(0), ep))
	}
	delivered := ingestFor(t, s, at(0), mine)
	ingestFor(t, s, at(0), theirs) // leased below, and kept: delivering
	retried := ingestFor(t, s, at(0), theirs)
	leases := claimAll(t, s, at(0))
	require.Len(t, leases, 6)
	for _, id := range dead {
		finish(t, s, at(time.Second), leases[id], herald.StatusDead)
	}
	finish(t, s, at(time.Second), leases[delivered], herald.StatusDelivered)
	retry := outcome(leases[retried], herald.StatusPending, at(time.Second))
	retry.RetryIn = time.Hour // pending, not due at 2 m
	require.Equal(t, []bool{true}, complete(t, s, at(time.Second), retry))
	ingestFor(t, s, at(0), mine)
	ingestFor(t, s, at(time.Minute), theirs)

	type figures struct{ dead, due, pending, delivering int64 }
	for consumer, want := range map[string]figures{
		"": {3, 2, 3, 1}, "mine": {1, 1, 1, 0}, "theirs": {2, 1, 2, 1}, "nobody": {},
	} {
		full, err := s.Stats(t.Context(), &store.StatsParams{ConsumerID: consumer, Now: at(2 * time.Minute)})
		require.NoError(t, err)
		quick, err := s.Stats(t.Context(), &store.StatsParams{ConsumerID: consumer, QueueOnly: true, Now: at(2 * time.Minute)})
		require.NoError(t, err)
		require.Nil(t, quick.ByStatus)
		require.Equal(t, want.dead, full.DeadLetters, "consumer %q", consumer)
		require.Equal(t, full.ByStatus[herald.StatusDead], full.DeadLetters)
		require.Equal(t, want, figures{quick.DeadLetters, quick.DueNow, quick.Pending, quick.Delivering}, "consumer %q", consumer)
		require.Equal(t, figures{full.DeadLetters, full.DueNow, full.ByStatus[herald.StatusPending], full.ByStatus[herald.StatusDelivering]},
			figures{full.DeadLetters, full.DueNow, full.Pending, full.Delivering}, "consumer %q: the live counts agree with the counts by status", consumer)
		require.Equal(t, full.DueNow, quick.DueNow)
		require.Equal(t, full.OldestDueAge, quick.OldestDueAge)
	}
}

// testStatsOneConsumer: with ConsumerID set, every figure counts that
// consumer's deliveries alone.
func testStatsOneConsumer(t *testing.T, s store.Store) {
	mine := createEndpoint(t, s, newEndpoint("mine"), at(0))
	theirs := createEndpoint(t, s, newEndpoint("theirs"), at(0))
	delivered := ingestFor(t, s, at(0), mine)
	ingestFor(t, s, at(time.Minute), mine) // pending, due from 1 m
	ingestFor(t, s, at(0), theirs)
	ingestFor(t, s, at(0), theirs)
	leases := claimAll(t, s, at(0))
	finish(t, s, at(time.Second), leases[delivered], herald.StatusDelivered)
	for id, c := range leases {
		if id != delivered {
			finish(t, s, at(time.Second), c, herald.StatusDead)
		}
	}
	ingestFor(t, s, at(30*time.Second), theirs) // pending, due from 30 s

	want := map[string]struct {
		byStatus map[herald.Status]int64
		due      int64
		oldest   time.Duration
	}{
		"mine":   {map[herald.Status]int64{herald.StatusPending: 1, herald.StatusDelivered: 1}, 1, time.Minute},
		"theirs": {map[herald.Status]int64{herald.StatusPending: 1, herald.StatusDead: 2}, 1, 90 * time.Second},
		"":       {map[herald.Status]int64{herald.StatusPending: 2, herald.StatusDelivered: 1, herald.StatusDead: 2}, 2, 90 * time.Second},
		"nobody": {map[herald.Status]int64{}, 0, 0},
	}
	for consumer, w := range want {
		st, err := s.Stats(t.Context(), &store.StatsParams{ConsumerID: consumer, Now: at(2 * time.Minute)})
		require.NoError(t, err)
		for _, status := range allStatuses {
			require.Equal(t, w.byStatus[status], st.ByStatus[status], "consumer %q, %s", consumer, status)
		}
		require.Equal(t, w.due, st.DueNow, "consumer %q", consumer)
		require.Equal(t, w.oldest, st.OldestDueAge, "consumer %q", consumer)
	}
}

func testStats(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c", "order.*"), at(0))
	delivered := ingestFor(t, s, at(0), ep)
	dead := ingestFor(t, s, at(0), ep)
	cancelled := ingestFor(t, s, at(0), ep)
	ingestFor(t, s, at(0), ep) // stays delivering
	later := ingestFor(t, s, at(0), ep)
	leases := claimAll(t, s, at(0))
	require.Len(t, leases, 5)
	finish(t, s, at(time.Second), leases[delivered], herald.StatusDelivered)
	finish(t, s, at(time.Second), leases[dead], herald.StatusDead)
	retry := outcome(leases[later], herald.StatusPending, at(time.Second))
	retry.RetryIn = time.Hour
	require.Equal(t, []bool{true}, complete(t, s, at(time.Second), retry))
	_, err := s.DeliveryCancel(t.Context(), &store.DeliveryCancelParams{ID: cancelled, Now: at(time.Second)})
	require.NoError(t, err)
	ingestFor(t, s, at(time.Minute), ep)
	ingestFor(t, s, at(2*time.Minute), ep)
	ingestFor(t, s, at(10*time.Minute), ep) // not due yet at 5 m

	st, err := s.Stats(t.Context(), &store.StatsParams{Now: at(5 * time.Minute)})
	require.NoError(t, err)
	require.Equal(t, map[herald.Status]int64{
		herald.StatusPending:    4,
		herald.StatusDelivering: 1,
		herald.StatusDelivered:  1,
		herald.StatusDead:       1,
		herald.StatusCancelled:  1,
	}, st.ByStatus)
	require.Equal(t, int64(2), st.DueNow, "pending and due: the ones made at 1 m and 2 m")
	require.Equal(t, 4*time.Minute, st.OldestDueAge)

	st, err = s.Stats(t.Context(), &store.StatsParams{Now: at(2 * time.Hour)})
	require.NoError(t, err)
	require.Equal(t, int64(4), st.DueNow)
	require.Equal(t, 2*time.Hour-time.Minute, st.OldestDueAge)
}

func settingCases() []testCase {
	return []testCase{
		{"GetUnknownIsNotFound", testSettingGetUnknown},
		{"PutIfAbsentFirstWins", testSettingPutIfAbsent},
		{"PutIfAbsentConcurrentAgree", testSettingConcurrent},
	}
}

func testSettingGetUnknown(t *testing.T, s store.Store) {
	_, err := s.SettingGet(t.Context(), "api_key_hash")
	expectNotFound(t, err)
}

func testSettingPutIfAbsent(t *testing.T, s store.Store) {
	v, err := s.SettingPutIfAbsent(t.Context(), &store.SettingPutIfAbsentParams{Key: "api_key_hash", Value: "first"})
	require.NoError(t, err)
	require.Equal(t, "first", v)
	v, err = s.SettingPutIfAbsent(t.Context(), &store.SettingPutIfAbsentParams{Key: "api_key_hash", Value: "second"})
	require.NoError(t, err)
	require.Equal(t, "first", v)
	v, err = s.SettingGet(t.Context(), "api_key_hash")
	require.NoError(t, err)
	require.Equal(t, "first", v)

	v, err = s.SettingPutIfAbsent(t.Context(), &store.SettingPutIfAbsentParams{Key: "other", Value: ""})
	require.NoError(t, err)
	require.Empty(t, v)
	v, err = s.SettingGet(t.Context(), "other")
	require.NoError(t, err, "an empty value is a value")
	require.Empty(t, v)
	v, err = s.SettingPutIfAbsent(t.Context(), &store.SettingPutIfAbsentParams{Key: "other", Value: "late"})
	require.NoError(t, err)
	require.Empty(t, v)
}

func testSettingConcurrent(t *testing.T, s store.Store) {
	const n = 10
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		got   = make([]string, n)
		errs  = make([]error, n)
	)
	for i := range n {
		wg.Go(func() {
			<-start
			got[i], errs[i] = s.SettingPutIfAbsent(t.Context(), &store.SettingPutIfAbsentParams{Key: "k", Value: fmt.Sprint("v", i)})
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		require.Equal(t, got[0], got[i])
	}
	require.Regexp(t, `^v\d$`, got[0])
	v, err := s.SettingGet(t.Context(), "k")
	require.NoError(t, err)
	require.Equal(t, got[0], v)
}

func subscribeCases() []testCase {
	return []testCase{
		{"SignalsAfterIngest", testSubscribeIngest},
		{"SignalsAfterReplay", testSubscribeReplay},
		{"SignalsAfterRelease", testSubscribeRelease},
		{"SignalsAfterEnable", testSubscribeEnable},
		{"SignalsASoonRetry", testSubscribeSoonRetry},
		{"ClosesWhenContextEnds", testSubscribeClose},
	}
}

func subscribe(t *testing.T, s store.Store) <-chan struct{} {
	t.Helper()
	ch, err := s.Subscribe(t.Context())
	require.NoError(t, err)
	return ch
}

func testSubscribeIngest(t *testing.T, s store.Store) {
	createEndpoint(t, s, newEndpoint("c"), at(0))
	ch := subscribe(t, s)
	ingestOne(t, s, at(time.Second), "c", "order.created")
	require.True(t, waitSignal(t, ch))
}

func testSubscribeReplay(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c"), at(0))
	id := deadAfter(t, s, ep, at(0), 1)
	ch := subscribe(t, s)
	_, err := s.DeliveryReplay(t.Context(), &store.DeliveryReplayParams{ID: id, Now: at(time.Hour)})
	require.NoError(t, err)
	require.True(t, waitSignal(t, ch))
}

func testSubscribeRelease(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c"), at(0))
	id := ingestFor(t, s, at(0), ep)
	c := claimOne(t, s, at(0), id)
	ch := subscribe(t, s)
	require.NoError(t, s.DeliveryRelease(t.Context(), &store.DeliveryReleaseParams{
		Leases: []store.Lease{{DeliveryID: id, LeaseToken: c.LeaseToken}}, Now: at(time.Second),
	}))
	require.True(t, waitSignal(t, ch))
}

func testSubscribeEnable(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c"), at(0))
	disableEndpoint(t, s, ep.ID, at(0))
	ch := subscribe(t, s)
	_, err := s.EndpointSetEnabled(t.Context(), &store.EndpointSetEnabledParams{ID: ep.ID, Enabled: true, Now: at(time.Second)})
	require.NoError(t, err)
	require.True(t, waitSignal(t, ch))
}

func testSubscribeClose(t *testing.T, s store.Store) {
	createEndpoint(t, s, newEndpoint("c"), at(0))
	ctx, cancel := context.WithCancel(t.Context())
	ch, err := s.Subscribe(ctx)
	require.NoError(t, err)
	cancel()
	deadline := time.After(waitFor)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				// A later commit is fine with no one listening.
				ingestOne(t, s, at(time.Second), "c", "order.created")
				return
			}
		case <-deadline:
			require.FailNow(t, "subscription not closed after its context ended")
		}
	}
}

func lifecycleCases() []testCase {
	return []testCase{
		{"MigrateTwiceIsHarmless", testMigrateTwice},
		{"Ping", testPing},
	}
}

func testMigrateTwice(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c"), at(0))
	require.NoError(t, s.Migrate(t.Context()))
	require.NoError(t, s.Migrate(t.Context()))
	got, err := s.EndpointGet(t.Context(), ep.ID)
	require.NoError(t, err, "data survives")
	require.Equal(t, ep.ID, got.ID)
	ingestFor(t, s, at(time.Second), ep)
}

func testPing(t *testing.T, s store.Store) {
	require.NoError(t, s.Ping(t.Context()))
}
