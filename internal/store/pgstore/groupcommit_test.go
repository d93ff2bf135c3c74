package pgstore

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// groupSetup is a fresh store with one endpoint of consumer "c" taking
// every event, whose next group leader stops before it writes until the
// test lets it go.
type groupSetup struct {
	s  *Store
	ep *herald.Endpoint
	// held receives the size of each group about to be written; the
	// leader then waits for a value on release.
	held    chan int
	release chan struct{}
}

func setupGroups(t *testing.T) *groupSetup {
	return setupGroupsOn(t, openFresh(t))
}

// setupGroupsOn is setupGroups on the migrated store s.
func setupGroupsOn(t *testing.T, s *Store) *groupSetup {
	g := &groupSetup{s: s, held: make(chan int, 100), release: make(chan struct{}, 100)}
	g.ep = groupEndpoint(t, s, "c", 10)
	g.s.groups.maxLeaders = 1 // the calls behind the held leader queue
	g.s.groups.linger = -1    // no call waits for company unless a test says so
	g.s.groups.beforeWrite = func(n int) {
		g.held <- n
		<-g.release
	}
	return g
}

// groupEndpoint creates an enabled endpoint of consumer taking every
// event, with the in-flight cap given.
func groupEndpoint(tb testing.TB, s *Store, consumer string, maxInFlight int) *herald.Endpoint {
	tb.Helper()
	ep, err := s.EndpointCreate(tb.Context(), &store.EndpointCreateParams{Endpoint: &herald.Endpoint{
		ConsumerID: consumer, URL: "https://example.com/h", EventTypes: []string{"*"}, Enabled: true,
		Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Timeout: time.Second,
		MaxInFlight: maxInFlight, SignatureScheme: herald.SchemeStandard,
	}})
	require.NoError(tb, err)
	return ep
}

// answer is what one EventIngest call returned.
type answer struct {
	res []store.EventIngestResult
	err error
}

// send starts an EventIngest call of items and returns where its answer
// will arrive.
func (g *groupSetup) send(ctx context.Context, items ...store.EventIngestItem) <-chan answer {
	ch := make(chan answer, 1)
	go func() {
		res, err := g.s.EventIngest(ctx, &store.EventIngestParams{Events: items})
		ch <- answer{res, err}
	}()
	return ch
}

// queued waits until n calls wait in the queue.
func (g *groupSetup) queued(t *testing.T, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		g.s.groups.mu.Lock()
		defer g.s.groups.mu.Unlock()
		return len(g.s.groups.queue) == n
	}, 30*time.Second, time.Millisecond, "%d calls queued", n)
}

// nextGroup waits for the leader to stop before writing a group and
// returns the group's size; the leader waits for letGo.
func (g *groupSetup) nextGroup(t *testing.T) int {
	t.Helper()
	select {
	case n := <-g.held:
		return n
	case <-time.After(30 * time.Second):
		t.Fatal("no group was written")
		return 0
	}
}

func (g *groupSetup) letGo() { g.release <- struct{}{} }

// queueBehind sends a first call and holds its group, queues a call of
// each item behind it, lets the first group go, and holds the next one,
// of those calls: the caller lets it go. It returns the first call's
// answer and where the others' will arrive.
func (g *groupSetup) queueBehind(t *testing.T, items ...store.EventIngestItem) (answer, []<-chan answer) {
	t.Helper()
	ctx := t.Context()
	firstCh := g.send(ctx, event("first"))
	require.Equal(t, 1, g.nextGroup(t))
	var calls []<-chan answer
	for i, it := range items {
		calls = append(calls, g.send(ctx, it))
		g.queued(t, i+1)
	}
	g.letGo()
	first := recv(t, firstCh)
	require.NoError(t, first.err)
	require.Equal(t, len(items), g.nextGroup(t))
	return first, calls
}

// event is one event of consumer "c" with key as its idempotency key and
// payload.
func event(key string) store.EventIngestItem {
	return store.EventIngestItem{ConsumerID: "c", EventType: "a.b", Payload: []byte(`{"k":"` + key + `"}`), IdempotencyKey: key}
}

// recv waits for an answer.
func recv(t *testing.T, ch <-chan answer) answer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(30 * time.Second):
		t.Fatal("no answer")
		return answer{}
	}
}

// TestIngestCallsThatOverlapCommitTogether: calls that queue while a group
// is being written are written next as one transaction, each with its own
// answer: a call whose event fails rolls back alone, keys shared inside
// the group make one event, a call whose context ends while it waits
// leaves at once and writes nothing, and the group wakes the dispatchers
// once.
func TestIngestCallsThatOverlapCommitTogether(t *testing.T) {
	t.Parallel()
	g := setupGroups(t)
	ctx := t.Context()
	listener, err := g.s.listen(ctx)
	require.NoError(t, err)
	defer closeConn(listener)

	// The first call leads a group of its own and stops before writing
	// it; 63 calls queue behind it.
	first := g.send(ctx, event("first"))
	require.Equal(t, 1, g.nextGroup(t))
	var (
		own       = map[string]<-chan answer{} // keys used once
		shared    = map[string][]<-chan answer{}
		bad       <-chan answer // an event type PostgreSQL refuses (a NUL byte)
		gone      <-chan answer // cancelled while it waits
		againLone <-chan answer // the first call's key again
		cancel    context.CancelFunc
	)
	queue := 0
	for i := range 63 {
		switch {
		case i == 10:
			it := event("bad")
			it.EventType = "a.\x00"
			bad = g.send(ctx, it)
		case i == 20:
			var cctx context.Context
			cctx, cancel = context.WithCancel(ctx)
			gone = g.send(cctx, event("gone"))
		case i == 30:
			againLone = g.send(ctx, event("first"))
		case i%10 == 5: // 6 calls: 3 keys used twice each
			k := fmt.Sprint("shared", i%3)
			shared[k] = append(shared[k], g.send(ctx, event(k)))
		default:
			k := fmt.Sprint("own", i)
			own[k] = g.send(ctx, event(k))
		}
		queue++
		g.queued(t, queue) // in this order
	}
	cancel()
	a := recv(t, gone)
	require.ErrorIs(t, a.err, context.Canceled, "a call leaves the queue when its context ends")
	g.queued(t, 62)

	g.letGo()
	require.Equal(t, 62, g.nextGroup(t), "the queue is written as one group")
	g.letGo()

	a = recv(t, first)
	require.NoError(t, a.err)
	firstEvent := a.res[0].Event
	for k, ch := range own {
		a := recv(t, ch)
		require.NoError(t, a.err, k)
		require.Len(t, a.res, 1, k)
		require.False(t, a.res[0].Duplicate, k)
		require.Len(t, a.res[0].Deliveries, 1, k)
		ev, err := g.s.EventGet(ctx, a.res[0].Event.ID)
		require.NoError(t, err, k)
		require.Equal(t, `{"k":"`+k+`"}`, string(ev.Payload))
		d, err := g.s.DeliveryGet(ctx, a.res[0].Deliveries[0].ID)
		require.NoError(t, err, k)
		require.Equal(t, herald.StatusPending, d.Status)
	}
	for k, chs := range shared {
		made, again := recv(t, chs[0]), recv(t, chs[1])
		require.NoError(t, made.err, k)
		require.NoError(t, again.err, k)
		require.False(t, made.res[0].Duplicate, "the first call with %s makes its event", k)
		require.True(t, again.res[0].Duplicate, "the second call with %s, in the same group, is a duplicate", k)
		require.Equal(t, made.res[0].Event.ID, again.res[0].Event.ID, k)
		require.Equal(t, made.res[0].Deliveries, again.res[0].Deliveries, k)
	}
	a = recv(t, againLone)
	require.NoError(t, a.err)
	require.True(t, a.res[0].Duplicate)
	require.Equal(t, firstEvent.ID, a.res[0].Event.ID)
	a = recv(t, bad)
	require.ErrorContains(t, a.err, "ingest events")
	require.Nil(t, a.res)

	page, err := g.s.EventList(ctx, &store.EventListParams{ConsumerID: "c", Limit: store.MaxListLimit})
	require.NoError(t, err)
	require.Len(t, page.Items, 1+len(own)+len(shared), "one event per key, none of the failed or cancelled calls")
	for _, ev := range page.Items {
		require.NotContains(t, []string{"bad", "gone"}, ev.IdempotencyKey)
	}
	require.EqualValues(t, 3, g.s.groups.written.Load(),
		"64 calls, 3 transactions: the lone call's, the group's batch, which the bad call failed, and the group call by call")

	// One wake-up per transaction: the lone call's and the group's. A
	// notification of our own marks the end of those.
	_, err = g.s.pool.Exec(ctx, "SELECT pg_notify($1, 'end')", g.s.channel)
	require.NoError(t, err)
	wakes := 0
	for {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		n, err := listener.WaitForNotification(wctx)
		cancel()
		require.NoError(t, err)
		if n.Payload == "end" {
			break
		}
		wakes++
	}
	require.Equal(t, 2, wakes)

	// Nothing waits now: a lone call leads a group of one.
	lone := g.send(ctx, event("lone"))
	require.Equal(t, 1, g.nextGroup(t))
	g.letGo()
	a = recv(t, lone)
	require.NoError(t, a.err)
	require.False(t, a.res[0].Duplicate)
	g.s.groups.mu.Lock()
	require.Zero(t, g.s.groups.leaders)
	require.Empty(t, g.s.groups.queue)
	g.s.groups.mu.Unlock()
}

// TestIngestGroupsAreBounded: a group takes at most maxGroupCalls calls and,
// past its first call, at most maxGroupItems events; the calls left lead
// the next groups, in order.
func TestIngestGroupsAreBounded(t *testing.T) {
	t.Parallel()
	g := setupGroups(t)
	ctx := t.Context()

	first := g.send(ctx, event("first"))
	require.Equal(t, 1, g.nextGroup(t))
	var calls []<-chan answer
	for i := range 150 {
		calls = append(calls, g.send(ctx, event(fmt.Sprint("k", i))))
		g.queued(t, i+1)
	}
	// Calls of many events, which the item bound splits.
	big := func(tag string, n int) []store.EventIngestItem {
		items := make([]store.EventIngestItem, n)
		for i := range items {
			items[i] = store.EventIngestItem{ConsumerID: "nobody", EventType: "a.b", Payload: []byte(`{}`),
				IdempotencyKey: fmt.Sprint(tag, i)}
		}
		return items
	}
	for i := range 3 {
		calls = append(calls, g.send(ctx, big(fmt.Sprint("big", i), maxGroupItems/3+1)...))
		g.queued(t, 151+i)
	}
	var sizes []int
	for range 4 {
		g.letGo()
		sizes = append(sizes, g.nextGroup(t))
	}
	g.letGo()
	// 150 = 64 + 64 + 22; the third group takes two big calls too (22 +
	// 2 × 1667 events), and the third big call, past the bound, leads a
	// group of its own.
	require.Equal(t, []int{maxGroupCalls, maxGroupCalls, 22 + 2, 1}, sizes)
	require.NoError(t, recv(t, first).err)
	for i, ch := range calls {
		require.NoError(t, recv(t, ch).err, "call %d", i)
	}
	require.EqualValues(t, 5, g.s.groups.written.Load())
}

// refuseAtCommitSQL makes every transaction that inserted an event of
// type refused.at.commit fail at its COMMIT (a deferred trigger), so
// tests can see what a call is told when its commit fails.
var refuseAtCommitSQL = refuseAtCommit("events", "NEW.event_type = 'refused.at.commit'")

// refuseAtCommit is the SQL of a deferred constraint trigger that fails
// the COMMIT of any transaction that inserted a row of table for which
// when holds.
func refuseAtCommit(table, when string) string {
	return `
		CREATE FUNCTION refuse_` + table + `_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'refused at commit'; END $$;
		CREATE CONSTRAINT TRIGGER refuse_` + table + `_at_commit AFTER INSERT ON ` + table + `
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
			WHEN (` + when + `) EXECUTE FUNCTION refuse_` + table + `_at_commit()`
}

// TestIngestGroupThatCannotCommitFailsEveryCall: accepted means committed,
// so when a group's COMMIT fails every call in it fails, and none of its
// events is kept. A deferred constraint trigger fails the commit of any
// transaction holding an event of type "refused.at.commit".
func TestIngestGroupThatCannotCommitFailsEveryCall(t *testing.T) {
	t.Parallel()
	g := setupGroups(t)
	ctx := t.Context()
	_, err := g.s.pool.Exec(ctx, refuseAtCommitSQL)
	require.NoError(t, err)

	first := g.send(ctx, event("first"))
	require.Equal(t, 1, g.nextGroup(t))
	refused := event("refused")
	refused.EventType = "refused.at.commit"
	calls := []<-chan answer{g.send(ctx, event("a"))}
	g.queued(t, 1)
	calls = append(calls, g.send(ctx, refused))
	g.queued(t, 2)
	calls = append(calls, g.send(ctx, event("b")))
	g.queued(t, 3)
	g.letGo()
	require.Equal(t, 3, g.nextGroup(t))
	g.letGo()

	require.NoError(t, recv(t, first).err)
	for i, ch := range calls {
		a := recv(t, ch)
		require.ErrorContains(t, a.err, "refused at commit", "call %d", i)
		require.Nil(t, a.res)
	}
	page, err := g.s.EventList(ctx, &store.EventListParams{ConsumerID: "c"})
	require.NoError(t, err)
	require.Len(t, page.Items, 1, "only the first call's event")
	require.Equal(t, "first", page.Items[0].IdempotencyKey)
}

// TestIngestGroupKeepsEachCallsTime: calls of one group that ask for
// different times (a test clock) get events made at their own time.
func TestIngestGroupKeepsEachCallsTime(t *testing.T) {
	t.Parallel()
	g := setupGroups(t)
	ctx := t.Context()
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	send := func(key string, now time.Time) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			res, err := g.s.EventIngest(ctx, &store.EventIngestParams{Events: []store.EventIngestItem{event(key)}, Now: now})
			ch <- answer{res, err}
		}()
		return ch
	}
	first := send("first", t0)
	require.Equal(t, 1, g.nextGroup(t))
	times := []time.Time{t0.Add(time.Hour), t0, t0.Add(time.Hour), t0.Add(time.Minute)}
	var calls []<-chan answer
	for i, at := range times {
		calls = append(calls, send(fmt.Sprint("k", i), at))
		g.queued(t, i+1)
	}
	g.letGo()
	require.Equal(t, len(times), g.nextGroup(t))
	g.letGo()
	require.NoError(t, recv(t, first).err)
	for i, ch := range calls {
		a := recv(t, ch)
		require.NoError(t, a.err, "call %d", i)
		require.Equal(t, times[i], a.res[0].Event.CreatedAt, "call %d", i)
		ev, err := g.s.EventGet(ctx, a.res[0].Event.ID)
		require.NoError(t, err)
		require.Equal(t, times[i], ev.CreatedAt, "call %d", i)
		d, err := g.s.DeliveryGet(ctx, a.res[0].Deliveries[0].ID)
		require.NoError(t, err)
		require.Equal(t, times[i], d.CreatedAt, "call %d", i)
	}
	require.EqualValues(t, 2, g.s.groups.written.Load(), "the lone call's transaction and the group's")
}

// BenchmarkIngestSingleConcurrent: 64 callers ingesting one event each
// at a time, as an API under load does, and how many calls shared each
// transaction.
func BenchmarkIngestSingleConcurrent(b *testing.B) {
	b.Run("groups", func(b *testing.B) { benchIngestSingleConcurrent(b, defaultLeaders) })
	// As many leaders as callers: every call writes alone, as without
	// group commit.
	b.Run("alone", func(b *testing.B) { benchIngestSingleConcurrent(b, 64) })
}

func benchIngestSingleConcurrent(b *testing.B, leaders int) {
	s := openFresh(b)
	s.groups.maxLeaders = leaders
	for i := range 100 {
		groupEndpoint(b, s, fmt.Sprint("c", i), 10)
	}
	payload := []byte(`{"pad":"` + strings.Repeat("x", 1000) + `"}`)
	var next atomic.Int64
	b.SetParallelism(32) // 64 callers on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1)
			_, err := s.EventIngest(b.Context(), &store.EventIngestParams{Events: []store.EventIngestItem{{
				ConsumerID: fmt.Sprint("c", i%100), EventType: "a.b", Payload: payload,
				IdempotencyKey: fmt.Sprint("k", i),
			}}})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/float64(s.groups.written.Load()), "calls/tx")
}

// TestIngestSecondGroupOnlyForAQueue: by default, calls that come while
// a group is written wait for it, rather than write a second group beside
// it (which, at a low rate, would find the endpoint locked by the first
// and queue what it could have leased); once moreLeadersQueue calls wait,
// the next one leads a second group, of itself and them.
func TestIngestSecondGroupOnlyForAQueue(t *testing.T) {
	t.Parallel()
	g := setupGroups(t)
	g.s.groups.maxLeaders = 0 // the defaults
	ctx := t.Context()
	first := g.send(ctx, event("first"))
	require.Equal(t, 1, g.nextGroup(t))
	var calls []<-chan answer
	for i := range moreLeadersQueue {
		calls = append(calls, g.send(ctx, event(fmt.Sprint("queued", i))))
		g.queued(t, i+1)
	}
	calls = append(calls, g.send(ctx, event("leads")))
	require.Equal(t, moreLeadersQueue+1, g.nextGroup(t), "a second group, of the queue")
	g.letGo()
	g.letGo()
	require.NoError(t, recv(t, first).err)
	for _, ch := range calls {
		require.NoError(t, recv(t, ch).err)
	}
}

// lingering waits until a leader waits for company.
func (g *groupSetup) lingering(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		g.s.groups.mu.Lock()
		defer g.s.groups.mu.Unlock()
		return g.s.groups.company != nil
	}, 30*time.Second, time.Millisecond, "a leader waits for company")
}

// TestIngestInASteadyStreamWaitsForCompany: a call that comes within
// the linger of the call before it, and finds no group being written and
// no call waiting, waits for the calls that follow, until lingerGroup of
// them are there, and leads them as one group; a call after a group that
// large, or after a quiet spell, goes at once, alone.
func TestIngestInASteadyStreamWaitsForCompany(t *testing.T) {
	t.Parallel()
	g := setupGroups(t)
	g.s.groups.maxLeaders = 0 // the defaults
	g.s.groups.linger = time.Hour
	ctx := t.Context()

	first := g.send(ctx, event("first"))
	require.Equal(t, 1, g.nextGroup(t), "the first call has no call before it: it goes at once")
	g.letGo()
	require.NoError(t, recv(t, first).err)

	// Within the hour: the next call leads, and waits.
	var calls []<-chan answer
	calls = append(calls, g.send(ctx, event("leader")))
	g.lingering(t)
	for i := range lingerGroup - 1 {
		calls = append(calls, g.send(ctx, event(fmt.Sprint("company", i))))
		if i < lingerGroup-2 {
			g.queued(t, i+1)
		}
	}
	require.Equal(t, lingerGroup, g.nextGroup(t), "the leader and the calls that came while it waited")
	g.letGo()
	for _, ch := range calls {
		require.NoError(t, recv(t, ch).err)
	}
	require.EqualValues(t, 2, g.s.groups.written.Load(), "the first call's transaction and the group's")

	// After a group of lingerGroup calls (groups form by themselves: a
	// load), a call goes at once.
	loaded := g.send(ctx, event("after a full group"))
	require.Equal(t, 1, g.nextGroup(t))
	g.letGo()
	require.NoError(t, recv(t, loaded).err)

	// After a quiet spell longer than the linger, a call goes at once.
	g.s.groups.mu.Lock()
	g.s.groups.lastCall = time.Now().Add(-2 * time.Hour)
	g.s.groups.mu.Unlock()
	alone := g.send(ctx, event("after a quiet spell"))
	require.Equal(t, 1, g.nextGroup(t))
	g.letGo()
	require.NoError(t, recv(t, alone).err)
}

// TestIngestWaitForCompanyEnds: a call that waits for company and finds
// none goes alone once the linger is over; one whose context ends while
// it waits answers the context's error, writes nothing, and leaves no
// leader behind it.
func TestIngestWaitForCompanyEnds(t *testing.T) {
	t.Parallel()
	g := setupGroups(t)
	g.s.groups.maxLeaders = 0
	g.s.groups.linger = 50 * time.Millisecond
	ctx := t.Context()
	first := g.send(ctx, event("first"))
	require.Equal(t, 1, g.nextGroup(t))
	g.letGo()
	require.NoError(t, recv(t, first).err)
	lone := g.send(ctx, event("lone"))
	require.Equal(t, 1, g.nextGroup(t), "no company came: alone")
	g.letGo()
	require.NoError(t, recv(t, lone).err)

	g.s.groups.linger = time.Hour
	cctx, cancel := context.WithCancel(ctx)
	given := g.send(cctx, event("given up"))
	g.lingering(t)
	cancel()
	require.ErrorIs(t, recv(t, given).err, context.Canceled)
	g.s.groups.linger = -1
	next := g.send(ctx, event("next"))
	require.Equal(t, 1, g.nextGroup(t), "the lead was not kept by the call that gave up")
	g.letGo()
	require.NoError(t, recv(t, next).err)
	n, err := g.s.EventList(ctx, &store.EventListParams{ConsumerID: "c", Limit: 10})
	require.NoError(t, err)
	require.Len(t, n.Items, 3, "first, lone and next; not the call that gave up")
}
