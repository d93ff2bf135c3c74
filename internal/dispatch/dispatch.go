package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/logkey"
	"github.com/heraldhooks/herald/internal/retry"
	"github.com/heraldhooks/herald/internal/sender"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/trace"
	"github.com/heraldhooks/herald/verify"
)

// Sender makes one HTTP attempt. *sender.Sender is the production one.
type Sender interface {
	Send(ctx context.Context, req *sender.Request) sender.Result
}

// Store is what a Dispatcher needs of the storage seam (a store.Store
// has it): wake-ups, claims and the tidying of the endpoint queue they
// leave, the next due time, outcome writes, and leases handed back.
type Store interface {
	Subscribe(ctx context.Context) (<-chan struct{}, error)
	DeliveryClaim(ctx context.Context, p *store.DeliveryClaimParams) ([]*store.ClaimedDelivery, error)
	EndpointQueueTidy(ctx context.Context, p *store.EndpointQueueTidyParams) (int, error)
	DeliveryNextDue(ctx context.Context, p *store.DeliveryNextDueParams) (store.NextDue, error)
	DeliveryCompleteMany(ctx context.Context, p *store.DeliveryCompleteManyParams) ([]bool, error)
	DeliveryRelease(ctx context.Context, p *store.DeliveryReleaseParams) error
}

// Config wires a Dispatcher.
type Config struct {
	Store  Store
	Sender Sender
	Clock  clock.Clock
	Logger *slog.Logger
	// Concurrency is how many attempts run at once on this node (default 512).
	Concurrency int
	// LongAfter is how long an attempt runs before it counts as long
	// (default 250 ms of real time): a long attempt gives its slot back to
	// the node, and runs on among at most LongAttempts others (default
	// 8 x Concurrency), so that receivers that hang until their timeout
	// cannot hold every slot and keep healthy endpoints waiting
	// (invariant 9). Real time, as Linger: it decides how busy the node
	// is, never what happens to a delivery.
	LongAfter    time.Duration
	LongAttempts int
	// ClaimBatch bounds one claim (default Concurrency).
	ClaimBatch int
	// PollInterval is how often an idle dispatcher looks for due work when
	// no wake-up came (default 1 s). Retries that fall due are found this way.
	PollInterval time.Duration
	// LeaseMargin is added to twice the endpoint timeout for each lease
	// (default 15 s), covering the outcome write after the attempt. A node
	// that stops for longer (a freeze, a long pause) loses its leases, and
	// does not send what it claimed before.
	LeaseMargin time.Duration
	// MaxLeaseLosses is how many times a delivery's lease may be lost
	// before a claim ends it dead with reason lease_lost
	// (store.DeliveryClaimParams.MaxLeaseLosses; default
	// herald.DefaultMaxLeaseLosses).
	MaxLeaseLosses int
	// DrainTimeout is how long a stopping dispatcher lets attempts in flight
	// finish before it cancels them and hands their leases back (default 30 s).
	DrainTimeout time.Duration
	// OutcomeRetryFor is how long a failed outcome write is tried again
	// (default 30 s): through a database restart or failover, so that
	// attempts that happened are recorded instead of being sent again once
	// their leases expire. Past it the outcomes are dropped and their
	// leases expire: at least once, never lost.
	OutcomeRetryFor time.Duration
	// Linger is how long a dispatcher woken for new work within Linger
	// of its last claim waits before it claims again, and how long the
	// outcome writer waits for more outcomes beside the first, so that at
	// low rates one claim and one outcome write carry the several
	// deliveries that arrive meanwhile rather than one each (each is a
	// write transaction). Work that wakes a dispatcher quiet for longer
	// is claimed at once. It is a pause in real time, a few milliseconds
	// added to a delivery's latency, not a due time: it ignores Clock.
	// Under load claims and writes fill up without it and no claim waits.
	// Default 0: no pause.
	Linger time.Duration
	// Rand draws the jitter of retry delays, in [0, 1). Default math/rand/v2.
	Rand func() float64
	// Hooks observe outcomes (metrics, notifications); optional.
	Hooks Hooks
	// Trace records a span for each attempt, a child of the span context
	// stored with its event, and gives the webhook its traceparent unless
	// the endpoint opts out. Nil: tracing is off.
	Trace *trace.Tracing
}

// Hooks let other parts observe the dispatcher without it knowing them
// (metrics, for one). Every hook is optional, is called from the
// dispatcher's own goroutines, and must be quick and safe for concurrent
// use: it runs on the path of every attempt.
type Hooks struct {
	// LeaseTooShort is called when an attempt is dropped before its request
	// went out because its lease would not outlive it (the node stalled
	// between the claim and the attempt): the lease is handed back, and no
	// attempt is spent.
	LeaseTooShort func(c *store.ClaimedDelivery)
	// Frozen is called when a failed attempt is not written because it
	// outlived its timeout only as its node was stopped (frozenAttempt):
	// the lease is handed back, and neither the attempt budget nor the
	// endpoint's breaker counts it.
	Frozen func(c *store.ClaimedDelivery)
	// InFlight is called with +1 just before an attempt's request goes out
	// and with -1 once it has come back (or been cut off), so the sum is the
	// number of requests in flight on this node.
	InFlight func(delta int)
	// Redelivered is called once for each delivery a claim took from an
	// expired lease (store.ClaimedDelivery.Redelivered): an earlier attempt
	// was lost with its node, and may have reached the receiver. It is
	// called just before the attempt's request goes out or, for a suspect
	// handed back (isolateSuspects), then: the claim that takes it again
	// no longer sees the lease lost.
	Redelivered func(c *store.ClaimedDelivery)
	// AttemptDone is called after each attempt with its claimed delivery,
	// result and the outcome decided (before it is written).
	AttemptDone func(c *store.ClaimedDelivery, res *sender.Result, out *store.DeliveryOutcome)
	// OutcomeWritten is called once per outcome after the batch holding it
	// was written, with the claimed delivery it ends and the time the
	// outcome was decided, on the dispatcher's clock. applied is false when
	// the store did not apply it: the lease was no longer held, or the write
	// failed (the lease then expires and the delivery is claimed again).
	OutcomeWritten func(c *store.ClaimedDelivery, out *store.DeliveryOutcome, decidedAt time.Time, applied bool)
	// Notified is called, once a batch of outcomes is written, with each
	// notification the write emitted (herald.endpoint.failing, .disabled,
	// .recovered, herald.delivery.dead), at the moment their events are
	// ingested (store.DeliveryCompleteManyParams.Notify). It must not
	// block: the mailer only queues them.
	Notified func(n herald.Notification)
	// DeadAtClaim is called for each delivery a claim of this node ended
	// dead instead of handing it out (reason lease_lost: its lease was
	// lost --max-lease-losses times, store.LeaseLossesEnd), as the claim
	// reports its herald.delivery.dead. Such an end is no outcome, so
	// OutcomeWritten never sees it. The delivery of a notification, for
	// which none is emitted, is not reported.
	DeadAtClaim func(reason herald.DeadReason)
}

func (c *Config) setDefaults() {
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 512
	}
	if c.LongAfter <= 0 {
		c.LongAfter = 250 * time.Millisecond
	}
	if c.LongAttempts <= 0 {
		c.LongAttempts = 8 * c.Concurrency
	}
	if c.ClaimBatch <= 0 || c.ClaimBatch > c.Concurrency {
		c.ClaimBatch = c.Concurrency
	}
	if c.PollInterval <= 0 {
		c.PollInterval = time.Second
	}
	if c.LeaseMargin <= 0 {
		c.LeaseMargin = 15 * time.Second
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 30 * time.Second
	}
	if c.OutcomeRetryFor <= 0 {
		c.OutcomeRetryFor = defaultOutcomeRetryFor
	}
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
}

// Dispatcher claims and delivers. Create it with New and start it with Run.
type Dispatcher struct {
	cfg Config
	log *slog.Logger

	// takerMu guards taking, the slots and jobs of the Run under way (nil
	// when none is), where Reserve and Take hand work leased at ingest.
	takerMu sync.Mutex
	taking  *taking
	// begun counts the deliveries handed to workers lately, claimed or
	// leased at ingest: how fast work arrives (Reserve).
	begun begunWindow
	// suspectHeld says a suspect (isolateSuspects) is in flight on this
	// node: claimed, and its outcome or hand-back not written yet.
	suspectHeld atomic.Bool
	// suspectFreed is signalled when the suspect in flight ends.
	suspectFreed chan struct{}
	// claimNotify is each claim's Notify (claimNotified), made once.
	claimNotify func(n herald.Notification)
	// long keeps the attempts under way and turns long ones slotless.
	long longAttempts
}

// New returns a Dispatcher for cfg.
func New(cfg Config) *Dispatcher {
	cfg.setDefaults()
	d := &Dispatcher{cfg: cfg, log: cfg.Logger, suspectFreed: make(chan struct{}, 1),
		long: longAttempts{after: cfg.LongAfter, most: cfg.LongAttempts}}
	if cfg.Hooks.DeadAtClaim != nil || cfg.Hooks.Notified != nil {
		d.claimNotify = d.claimNotified
	}
	return d
}

// claimNotified passes on a notification a claim emitted: a claim emits
// only the herald.delivery.dead of a delivery it ended lease_lost
// (store.LeaseLostNotification), which Hooks.DeadAtClaim counts.
func (d *Dispatcher) claimNotified(n herald.Notification) {
	if hook := d.cfg.Hooks.DeadAtClaim; hook != nil && n.EventType == herald.NotifyDeliveryDead {
		hook(herald.DeadLeaseLost)
	}
	if hook := d.cfg.Hooks.Notified; hook != nil {
		hook(n)
	}
}

// job is a claimed delivery handed to a worker, with the end of its lease
// on this node's clock, counted from just before the claim was asked for:
// the database set the lease's expiry after that, so the lease ends no
// earlier than leaseEnd, whatever the clocks of this node and the database
// say.
type job struct {
	c        *store.ClaimedDelivery
	leaseEnd time.Time
	suspect  bool // the node's one suspect (isolateSuspects)
}

// result is what a worker hands the writer: an outcome to write, or a lease
// to hand back when the attempt never happened (shutdown, or a lease that
// would not outlive it). An outcome comes
// with the claim it ends and the time it was decided, for Hooks.OutcomeWritten.
type result struct {
	outcome   *store.DeliveryOutcome
	release   *store.Lease
	claimed   *store.ClaimedDelivery
	sent      *sender.Result // with an outcome
	decidedAt time.Time
	suspect   bool // its job's
	// slotless: the attempt turned long and gave its slot back then
	// (longAttempts), so writing it gives none back.
	slotless bool
}

// Run claims and delivers until ctx ends, then stops claiming, lets attempts
// in flight finish (for at most DrainTimeout), writes their outcomes, hands
// back the leases of work not attempted, and returns. It returns an error
// only when it cannot start.
func (d *Dispatcher) Run(ctx context.Context) error {
	subCtx, cancelSub := context.WithCancel(context.Background())
	defer cancelSub()
	wake, err := d.cfg.Store.Subscribe(subCtx)
	if err != nil {
		return fmt.Errorf("subscribe to wake-ups: %w", err)
	}

	// sendCtx outlives ctx by DrainTimeout so attempts in flight can finish.
	sendCtx, cancelSend := context.WithCancel(context.Background())
	defer cancelSend()
	stopDrain := context.AfterFunc(ctx, func() {
		t := time.NewTimer(d.cfg.DrainTimeout)
		defer t.Stop()
		select {
		case <-t.C:
			cancelSend()
		case <-sendCtx.Done():
		}
	})
	defer stopDrain()

	n := d.cfg.Concurrency
	jobs := make(chan job, n)
	results := make(chan result, n)
	// slots holds one token per attempt that may start; a token comes back
	// when the attempt's outcome is written.
	slots := make(chan struct{}, n)
	for range n {
		slots <- struct{}{}
	}

	// unwritten counts attempts that have ended and whose outcomes are
	// not written yet: slots that the writer is about to give back.
	var unwritten atomic.Int64
	var workers sync.WaitGroup
	var worker func()
	worker = func() {
		defer workers.Done()
		for j := range jobs {
			a := d.long.begin()
			r := d.attempt(ctx, sendCtx, j)
			r.suspect = j.suspect
			r.slotless = d.long.end(a)
			if !r.slotless {
				unwritten.Add(1)
			}
			// The hook runs here, after the count, so that an attempt
			// it reports ended is already counted unwritten.
			if hook := d.cfg.Hooks.AttemptDone; hook != nil && r.outcome != nil {
				hook(r.claimed, r.sent, r.outcome)
			}
			results <- r
			if r.slotless {
				return // a worker took its place when it turned long
			}
		}
	}
	spawn := func() {
		workers.Add(1)
		go worker()
	}
	for range n {
		spawn()
	}
	d.takeFrom(&taking{slots: slots, jobs: jobs, spawn: spawn})
	// kick wakes the claim loop when outcomes are written: a finished
	// attempt frees room under its endpoint's in-flight cap (and moves a
	// FIFO endpoint's head), so capped endpoints flow at the speed of their
	// answers rather than of the poll interval. rescheduled wakes it when
	// the written batch changed due times: leases handed back (due at
	// once) or retries scheduled (due sooner, perhaps, than the time the
	// claim loop is sleeping until).
	kick := make(chan struct{}, 1)
	rescheduled := make(chan struct{}, 1)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		d.writeResults(results, slots, kick, rescheduled, &unwritten)
	}()

	d.claimLoop(ctx, wake, kick, rescheduled, jobs, slots, &unwritten, spawn)

	d.takeFrom(nil)
	close(jobs)
	workers.Wait()
	close(results)
	<-writerDone
	return nil
}

// claimLoop claims as many deliveries as there are free slots, and sleeps
// when nothing is due until a wake-up, the poll interval, or a free slot.
//
// When its last claim came back short (it is caught up: new work is
// leased at ingest, or comes one wake-up at a time), it leaves up to
// claimLeaves slots free for ingests to reserve (Reserve) while it claims:
// a claim that held every slot made each ingest during it queue what it
// would have leased, and wake this loop for another claim, which did the
// same to the ingests during it.
func (d *Dispatcher) claimLoop(ctx context.Context, wake, kick, rescheduled <-chan struct{}, jobs chan<- job, slots chan struct{}, unwritten *atomic.Int64, spawn func()) {
	var tidiedAt time.Time
	leave := min(claimLeaves, d.cfg.ClaimBatch/8)
	caughtUp := false // a node that starts may find a backlog
	for ctx.Err() == nil {
		// Take at least one slot (waiting if all are busy: then, as soon
		// as the oldest attempt turns long, those that have give theirs),
		// then every free one, but those left for ingests.
		if !d.awaitSlot(ctx, slots, spawn) {
			return
		}
		more := d.cfg.ClaimBatch - 1
		if caughtUp {
			more = min(more, len(slots)-leave)
		}
		free := 1 + takeFree(slots, max(more, 0))
		// While outcomes wait to be written, the write under way will give
		// their slots back in a moment: claim then, a batch, rather than
		// spend a claim (a write transaction) on the few free now. Attempts
		// still running (a slow endpoint) are not waited for.
		for free < d.cfg.ClaimBatch/2 && unwritten.Load() > 0 {
			select {
			case <-kick:
			case <-ctx.Done():
				return
			}
			free += takeFree(slots, d.cfg.ClaimBatch-free)
		}

		// lookedAt is also where each lease is counted from (job.leaseEnd).
		lookedAt := d.cfg.Clock.Now()
		params := &store.DeliveryClaimParams{
			Limit:          free,
			LeaseMargin:    d.cfg.LeaseMargin,
			Now:            d.cfg.Clock.StoreNow(),
			MaxLeaseLosses: d.cfg.MaxLeaseLosses,
			Notify:         d.claimNotify,
		}
		claimed, err := d.cfg.Store.DeliveryClaim(ctx, params)
		claimEnded := time.Now()
		d.begun.add(d.cfg.Clock.Now(), len(claimed))
		if err != nil && ctx.Err() == nil {
			d.log.Error("claim deliveries", logkey.Error, err)
		}
		got := len(claimed)
		claimed, extra := d.isolateSuspects(claimed)
		for _, c := range claimed {
			jobs <- job{c: c, leaseEnd: lookedAt.Add(params.LeaseFor(&c.Endpoint)), suspect: c.LeaseLosses > 0}
		}
		for range free - len(claimed) {
			slots <- struct{}{}
		}
		caughtUp = err != nil || got < free
		if extra {
			// Suspects handed back are due at once: claiming now would
			// take them straight back.
			d.awaitSuspect(ctx)
			continue
		}
		if !caughtUp {
			continue // there may be more due right now
		}
		if at := d.cfg.Clock.Now(); at.Sub(tidiedAt) >= store.TidyInterval {
			tidiedAt = at
			d.tidy(ctx)
		}
		// Work that wakes a dispatcher quiet for Linger or longer since
		// its last claim is claimed at once; work that arrives sooner
		// waits Linger for more beside it, so that at a steady rate each
		// claim takes what arrived meanwhile.
		if d.idle(ctx, wake, kick, rescheduled, lookedAt) && time.Since(claimEnded) < d.cfg.Linger {
			pause(ctx, d.cfg.Linger)
		}
	}
}

// isolateSuspects keeps at most one suspect among what a claim returned,
// and hands the others back at once, fenced by their lease tokens
// (DeliveryRelease: pending, due now, no lost lease counted), reporting
// whether it handed any back. A suspect is a delivery that lost a lease
// before (store.ClaimedDelivery.LeaseLosses > 0; a redelivery is one): a
// node running it may be killed by it. A node runs one suspect at a time
// (suspectHeld), so one that holds a suspect takes no other.
//
// Without it, a delivery that kills its node (a poison payload) takes
// every other delivery that node held down with it: their leases run out
// together, the next claim takes them together, often on one node, with
// the poison among them, and after --max-lease-losses crashes the whole
// cohort goes dead lease_lost, other consumers' deliveries included.
// With it: after its first crash the poison is a suspect, and the node
// running it holds no other suspect, only deliveries that never lost a
// lease. An innocent delivery loses a lease as collateral of a crash at
// most once as a non-suspect (it is a suspect from then on), and as a
// suspect it runs alone among suspects, so only a poison that has not
// crashed a node yet (its first crash) can take it down again: about two
// losses, where the default limit is 5. Only a delivery that keeps
// killing nodes on its own reaches the limit.
//
// Work leased at ingest is never a suspect: it is new. The lost-lease
// count survives a hand-back, so a suspect handed back stays one for
// whichever node claims it next. Handing back costs a release statement
// for the claim that took suspects beside the one in flight; the claim
// loop then waits for that one to end (awaitSuspect) rather than claim
// them straight back, so the churn is bounded.
func (d *Dispatcher) isolateSuspects(claimed []*store.ClaimedDelivery) (kept []*store.ClaimedDelivery, handedBack bool) {
	var extra []*store.ClaimedDelivery
	n := 0
	for _, c := range claimed {
		if c.LeaseLosses > 0 && !d.suspectHeld.CompareAndSwap(false, true) {
			extra = append(extra, c)
			continue
		}
		claimed[n] = c
		n++
	}
	if len(extra) == 0 {
		return claimed, false
	}
	clear(claimed[n:])
	for _, c := range extra {
		if c.Redelivered {
			d.redelivered(c)
		}
	}
	d.log.Info("handing back suspects: this node runs one delivery that lost a lease at a time",
		logkey.Deliveries, len(extra))
	d.handBack(extra)
	return claimed[:n], true
}

// awaitSuspect waits, after a claim whose suspects were handed back, for
// the suspect in flight to end, the poll interval, or the end of ctx, so
// that a node does not claim the suspects it handed back again and again
// while its own runs: at most one claim and one release per poll
// interval or suspect ended. Work leased at ingest still reaches it
// meanwhile (Take), and other nodes may claim what it handed back.
func (d *Dispatcher) awaitSuspect(ctx context.Context) {
	if !d.suspectHeld.Load() {
		return
	}
	t := d.cfg.Clock.NewTimer(d.cfg.PollInterval)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-d.suspectFreed:
	case <-t.C():
	}
}

// pause waits for d in real time, or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// tidy has the store move the due marks of endpoints whose due work is
// done (Store.EndpointQueueTidy), so later claims do not look at them. It
// runs when a claim came back short: this node is caught up, and the
// deliveries it just claimed are already with the senders.
func (d *Dispatcher) tidy(ctx context.Context) {
	_, err := d.cfg.Store.EndpointQueueTidy(ctx, &store.EndpointQueueTidyParams{
		Now:   d.cfg.Clock.StoreNow(),
		Limit: store.TidyLimit,
	})
	if err != nil && ctx.Err() == nil {
		d.log.Warn("tidy the endpoint queue", logkey.Error, err)
	}
}

// claimLeaves is the most slots a caught-up claim loop leaves free for
// ingests while it claims (at most an eighth of a claim's batch): a few
// single-event ingests' reservations, or one batch's.
const claimLeaves = 64

// takeFree takes up to n free slots without waiting and says how many.
func takeFree(slots <-chan struct{}, n int) int {
	got := 0
	for got < n {
		select {
		case <-slots:
			got++
		default:
			return got
		}
	}
	return got
}

// idle waits for a wake-up, a rescheduling, the end, the next due time the
// store knows of, or the poll interval counted from lookedAt, when the last
// claim looked: time that passed during the claim (a slow database, or a
// test clock moved meanwhile) counts, so work that fell due while the claim
// ran is not left waiting a whole interval more. A written outcome ends
// the wait too, but only while the store holds work due now that the claim
// left (NextDue.DueNow: an endpoint at its in-flight cap, a FIFO head in
// flight), to which the outcome may have made room; otherwise a claim
// after each outcome write would find nothing, and cost a transaction.
// It reports whether a wake-up (new work, from this node or another) ended
// the wait.
func (d *Dispatcher) idle(ctx context.Context, wake, kick, rescheduled <-chan struct{}, lookedAt time.Time) (woken bool) {
	until := lookedAt.Add(d.cfg.PollInterval)
	if !d.cfg.Clock.Now().Before(until) {
		return false
	}
	// Sleep no longer than until the next delivery falls due, so a retry
	// goes at its time, not at the next poll. An outcome that schedules a
	// retry sooner than that wakes this node (Subscribe) to look again.
	// Both ends are kept as times, and the wait is taken from the clock
	// after the read: time that passes during the read (a slow database,
	// a test clock moved meanwhile) counts.
	askedAt := d.cfg.Clock.Now()
	next, err := d.cfg.Store.DeliveryNextDue(ctx, &store.DeliveryNextDueParams{Now: d.cfg.Clock.StoreNow()})
	switch {
	case err != nil:
		if ctx.Err() == nil {
			d.log.Warn("read the next due time", logkey.Error, err)
		}
		next.DueNow = true // not known: heed every outcome, as is safe
	case next.Found && askedAt.Add(next.Wait).Before(until):
		until = askedAt.Add(next.Wait)
	}
	if !next.DueNow {
		kick = nil // a nil channel is never ready
	}
	wait := until.Sub(d.cfg.Clock.Now())
	if wait <= 0 {
		return false
	}
	t := d.cfg.Clock.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-wake:
		return true
	case <-kick:
	case <-rescheduled:
	case <-t.C():
	}
	return false
}

// attempt runs one delivery attempt and decides its outcome. Work that has
// not started when the dispatcher stops, or whose attempt was cut off by
// the drain deadline, is handed back instead: it spent no attempt.
//
// So is work whose lease would not outlive the attempt: if the request
// could still be running, on this node's clock, after the lease ends
// (j.leaseEnd), it does not go out. A node that froze (SIGSTOP, a paused
// VM) or stalled between the claim and the attempt would otherwise send
// while another node may hold the delivery: the receiver would get it
// twice, and the endpoint's rate limit and in-flight cap, which count
// leases, would be exceeded. The hand-back is fenced by the lease token, so
// it does nothing when another node has claimed the delivery since, and
// otherwise makes it due at once for a fresh claim. With clock.Real the
// check reads the monotonic clock, which keeps counting while a process is
// stopped.
func (d *Dispatcher) attempt(runCtx, sendCtx context.Context, j job) result {
	c := j.c
	lease := store.Lease{DeliveryID: c.Delivery.ID, LeaseToken: c.LeaseToken}
	if runCtx.Err() != nil {
		return result{release: &lease}
	}
	ep := &c.Endpoint
	now := d.cfg.Clock.Now()
	if now.Add(store.AttemptTimeout(ep)).After(j.leaseEnd) {
		d.leaseTooShort(c, j.leaseEnd.Sub(now))
		return result{release: &lease}
	}
	secrets := []string{ep.Secret}
	if ep.PreviousSecret != "" && ep.PreviousSecretExpiresAt != nil && now.Before(*ep.PreviousSecretExpiresAt) &&
		signsUnder(ep.SignatureScheme, ep.PreviousSecret) {
		secrets = append(secrets, ep.PreviousSecret)
	}
	if c.Redelivered {
		d.redelivered(c)
	}
	if d.cfg.Hooks.InFlight != nil {
		d.cfg.Hooks.InFlight(1)
	}
	sendCtx, endSpan := d.cfg.Trace.StartAttempt(sendCtx, c.Event.TraceContext, trace.Attempt{
		EndpointID: ep.ID, DeliveryID: c.Delivery.ID, EventID: c.Event.ID, Number: c.Delivery.AttemptCount + 1,
	})
	var traceParent string
	if !ep.NoTracePropagation {
		traceParent = d.cfg.Trace.TraceParent(sendCtx)
	}
	res := d.cfg.Sender.Send(sendCtx, &sender.Request{
		WebhookID:   c.Event.ID,
		EventType:   c.Event.EventType,
		Body:        c.Event.Payload,
		URL:         ep.URL,
		Secrets:     secrets,
		Scheme:      ep.SignatureScheme,
		Headers:     ep.Headers,
		Timeout:     ep.Timeout,
		Timestamp:   now,
		ClientCert:  clientCert(ep),
		TraceParent: traceParent,
	})
	if d.cfg.Hooks.InFlight != nil {
		d.cfg.Hooks.InFlight(-1)
	}
	spanEnd := trace.AttemptEnd{StatusCode: res.StatusCode, Duration: res.Duration, Outcome: "released", Error: res.Error}
	if sendCtx.Err() != nil && res.Class != sender.Success {
		endSpan(spanEnd)
		return result{release: &lease}
	}
	if end := d.cfg.Clock.Now(); frozenAttempt(&res, now, end, j.leaseEnd, ep) {
		d.frozen(c, end.Sub(now))
		endSpan(spanEnd)
		return result{release: &lease}
	}
	out := Decide(c, &res, d.cfg.Rand())
	spanEnd.Outcome = outcomeName(out.Status)
	endSpan(spanEnd)
	out.Attempt.AttemptedAt = now
	d.logAttempt(c, &res, out)
	return result{outcome: out, claimed: c, sent: &res, decidedAt: d.cfg.Clock.Now()}
}

// outcomeName names an outcome for the attempt's span: delivered, retry
// or dead.
func outcomeName(s herald.Status) string {
	if s == herald.StatusPending {
		return "retry"
	}
	return string(s)
}

// clientCert is the endpoint's client certificate for the sender, nil
// when it has none (the shared pool, nothing allocated).
func clientCert(ep *herald.Endpoint) *sender.ClientCert {
	if ep.ClientCertificate == "" {
		return nil
	}
	return &sender.ClientCert{EndpointID: ep.ID, CertPEM: ep.ClientCertificate, KeyPEM: ep.ClientKey}
}

// frozenSlack is how far past its endpoint's timeout an attempt may end
// and still count: the sender bounds the whole attempt by that timeout,
// so one that ends later than this was not running (its process was
// stopped: SIGSTOP, a paused VM or container, a machine's suspend).
const frozenSlack = 5 * time.Second

// frozenAttempt says whether an attempt with result res, started at start
// and ended at end (the node's clock), failed only because its node was
// stopped: it got no answer (a timeout, the connection lost: what a
// process stopped mid-request finds when it wakes, its deadline passed
// meanwhile), and it ended after its lease (leaseEnd; another node may
// hold the delivery by now) or took longer than its timeout and
// frozenSlack, which no request the sender makes can. Such a failure says
// nothing of the endpoint: the attempt is not written, neither spending
// the budget nor counting against the breaker (DESIGN.md, Operations), so
// a stalled node that wakes does not open healthy endpoints' breakers. A
// genuine timeout, the receiver silent for the endpoint's whole timeout,
// ends within the lease (an attempt starts only while its lease outlives
// the timeout) and within the slack, and counts as ever. An answer the
// receiver did give (a status code) is evidence of the endpoint however
// late it is read, and is written as ever (fenced by its lease token).
func frozenAttempt(res *sender.Result, start, end, leaseEnd time.Time, ep *herald.Endpoint) bool {
	if res.Class == sender.Success || res.StatusCode != 0 {
		return false
	}
	return end.After(leaseEnd) || end.Sub(start) > store.AttemptTimeout(ep)+frozenSlack
}

// frozen reports a failed attempt handed back by frozenAttempt, which
// took took on this node's clock, at warn: it is rare, and the trace of a
// node that was stopped mid-attempt.
func (d *Dispatcher) frozen(c *store.ClaimedDelivery, took time.Duration) {
	if hook := d.cfg.Hooks.Frozen; hook != nil {
		hook(c)
	}
	d.log.Warn("attempt not counted: it outlived its timeout while this node was stopped; lease handed back",
		logkey.DeliveryID, c.Delivery.ID,
		logkey.EndpointID, c.Endpoint.ID,
		logkey.EventID, c.Event.ID,
		logkey.DurationMS, took.Milliseconds(),
	)
}

// leaseTooShort reports an attempt dropped because its lease, with left
// of it remaining (negative when it has run out), would not outlive it. It
// is counted (Hooks.LeaseTooShort, a metric) so that an operator can alert
// on nodes that stall, and logged at warn with the delivery: it is rare,
// and the only trace of a stall that would otherwise have sent a
// duplicate.
func (d *Dispatcher) leaseTooShort(c *store.ClaimedDelivery, left time.Duration) {
	if hook := d.cfg.Hooks.LeaseTooShort; hook != nil {
		hook(c)
	}
	d.log.Warn("attempt not sent: its lease would expire before the attempt could end",
		logkey.DeliveryID, c.Delivery.ID,
		logkey.EndpointID, c.Endpoint.ID,
		logkey.EventID, c.Event.ID,
		logkey.LeaseLeftMS, left.Milliseconds(),
	)
}

// redelivered reports an attempt about to start for a delivery whose
// earlier lease expired without an outcome. It logs at warn: a lost lease
// means a node died, froze or lost its database mid-attempt, and the
// receiver may get this webhook twice (it carries the same webhook-id).
func (d *Dispatcher) redelivered(c *store.ClaimedDelivery) {
	if hook := d.cfg.Hooks.Redelivered; hook != nil {
		hook(c)
	}
	d.log.Warn("redelivering: an earlier lease expired without an outcome",
		logkey.DeliveryID, c.Delivery.ID,
		logkey.EndpointID, c.Endpoint.ID,
		logkey.EventID, c.Event.ID,
		logkey.Attempt, c.Delivery.AttemptCount+1,
	)
}

// Decide turns the result of attempt number c.Delivery.AttemptCount+1 into
// the delivery's next state, by the delivery rules of DESIGN.md. r in [0,1)
// draws the retry jitter.
func Decide(c *store.ClaimedDelivery, res *sender.Result, r float64) *store.DeliveryOutcome {
	number := c.Delivery.AttemptCount + 1
	out := &store.DeliveryOutcome{
		Lease: store.Lease{DeliveryID: c.Delivery.ID, LeaseToken: c.LeaseToken},
		Attempt: herald.Attempt{
			Number:     number,
			Duration:   res.Duration,
			StatusCode: res.StatusCode,
			Response:   res.Body,
			Error:      res.Error,
		},
	}
	// Backpressure concerns the whole endpoint, whatever becomes of this
	// delivery: a Retry-After (the sender reads it on 429 and 503 only)
	// pauses it; a bare 429 slows it down.
	out.PauseFor = res.RetryAfter
	out.Throttled = res.StatusCode == http.StatusTooManyRequests && res.RetryAfter == 0
	switch res.Class {
	case sender.Success:
		out.Status = herald.StatusDelivered
		return out
	case sender.Gone:
		out.Status = herald.StatusDead
		out.DeadReason = herald.DeadGone
		out.DisableEndpoint = string(herald.DeadGone)
		return out
	case sender.ClientError:
		if !c.Endpoint.RetryClientErrors {
			out.Status = herald.StatusDead
			out.DeadReason = herald.DeadClientError
			return out
		}
	}
	delay, ok := retry.PolicyFor(&c.Endpoint).Next(number, r)
	if !ok {
		out.Status = herald.StatusDead
		out.DeadReason = herald.DeadExhausted
		return out
	}
	// Retry-After is a floor: never earlier than the receiver asked.
	if res.RetryAfter > delay {
		delay = res.RetryAfter
	}
	out.Status = herald.StatusPending
	out.RetryIn = delay
	return out
}

func (d *Dispatcher) logAttempt(c *store.ClaimedDelivery, res *sender.Result, out *store.DeliveryOutcome) {
	level := slog.LevelDebug
	if res.Class != sender.Success {
		level = slog.LevelWarn
	}
	if !d.log.Enabled(context.Background(), level) {
		return
	}
	d.log.Log(context.Background(), level, "attempt",
		logkey.DeliveryID, c.Delivery.ID,
		logkey.EndpointID, c.Endpoint.ID,
		logkey.EventID, c.Event.ID,
		logkey.Attempt, out.Attempt.Number,
		logkey.StatusCode, res.StatusCode,
		logkey.DurationMS, res.Duration.Milliseconds(),
		logkey.Outcome, string(out.Status),
		logkey.Error, res.Error,
	)
}

// writeResults writes outcomes and releases in batches: it blocks for one
// result, takes every other result already waiting or arriving within
// Linger (up to maxWriteBatch), and writes them together. Under load
// batches grow by themselves. Writes use their own context so
// that a stopping node still records what it did.
func (d *Dispatcher) writeResults(results <-chan result, slots chan<- struct{}, kick, rescheduled chan<- struct{}, unwritten *atomic.Int64) {
	const maxWriteBatch = 500
	var outcomes []store.DeliveryOutcome
	var written []result // parallel to outcomes
	var releases []store.Lease
	for first := range results {
		outcomes, written, releases = outcomes[:0], written[:0], releases[:0]
		suspectDone := false
		slotless := 0
		add := func(r result) {
			suspectDone = suspectDone || r.suspect
			if r.slotless {
				slotless++
			}
			if r.outcome != nil {
				outcomes = append(outcomes, *r.outcome)
				written = append(written, r)
			} else {
				releases = append(releases, *r.release)
			}
		}
		add(first)
		var lingered <-chan time.Time
		var lingerTimer *time.Timer
		if d.cfg.Linger > 0 {
			lingerTimer = time.NewTimer(d.cfg.Linger)
			lingered = lingerTimer.C
		}
	drain:
		for len(outcomes)+len(releases) < maxWriteBatch {
			select {
			case r, ok := <-results:
				if !ok {
					break drain
				}
				add(r)
				continue
			default:
			}
			if lingered == nil {
				break
			}
			select {
			case r, ok := <-results:
				if !ok {
					break drain
				}
				add(r)
			case <-lingered:
				break drain
			}
		}
		if lingerTimer != nil {
			lingerTimer.Stop()
		}
		applied := d.write(outcomes, releases)
		if hook := d.cfg.Hooks.OutcomeWritten; hook != nil {
			for i := range outcomes {
				hook(written[i].claimed, &outcomes[i], written[i].decidedAt, i < len(applied) && applied[i])
			}
		}
		clear(written) // let the claims go
		back := len(outcomes) + len(releases) - slotless
		for range back {
			slots <- struct{}{}
		}
		// After the slots are back, so a claim loop that saw these
		// outcomes unwritten finds their slots when this kick wakes it.
		unwritten.Add(-int64(back))
		if suspectDone {
			d.suspectHeld.Store(false)
			select {
			case d.suspectFreed <- struct{}{}:
			default:
			}
		}
		select {
		case kick <- struct{}{}:
		default:
		}
		if len(releases) > 0 || slices.ContainsFunc(outcomes, retries) {
			select {
			case rescheduled <- struct{}{}:
			default:
			}
		}
	}
}

// retries says whether o schedules another attempt.
func retries(o store.DeliveryOutcome) bool { return o.Status == herald.StatusPending }

// Bounds on writing a batch of outcomes again after the write failed.
const (
	// defaultOutcomeRetryFor is Config.OutcomeRetryFor's default.
	defaultOutcomeRetryFor = 30 * time.Second
	// outcomeRetryFirst is the first wait before trying again; it doubles
	// up to outcomeRetryMax.
	outcomeRetryFirst = 50 * time.Millisecond
	outcomeRetryMax   = 2 * time.Second
)

// write writes a batch and says, for each outcome, whether the store
// applied it (none when the write failed). A failed outcome write is tried
// again, with backoff, for Config.OutcomeRetryFor: every write is fenced by its
// lease token, so a second try applies nothing that the first did, nor
// anything another node has claimed since. Meanwhile the batch's slots stay
// taken, so the node claims nothing new from a database it cannot write to.
func (d *Dispatcher) write(outcomes []store.DeliveryOutcome, releases []store.Lease) (applied []bool) {
	// The writes share one deadline, never shorter than the default retry
	// time, so a short OutcomeRetryFor bounds the tries again, not the
	// first try's time.
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), max(d.cfg.OutcomeRetryFor, defaultOutcomeRetryFor))
	defer cancel()
	if len(outcomes) > 0 {
		wait := outcomeRetryFirst
		for try := 1; ; try++ {
			var err error
			applied, err = d.cfg.Store.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{
				Outcomes: outcomes,
				Now:      d.cfg.Clock.StoreNow(),
				Notify:   d.cfg.Hooks.Notified,
			})
			if err == nil {
				if try > 1 {
					d.log.Info("wrote outcomes after retrying", logkey.Count, len(outcomes), logkey.Try, try)
				}
				break
			}
			applied = nil
			if ctx.Err() != nil || time.Since(start)+wait > d.cfg.OutcomeRetryFor {
				// The leases will expire and the deliveries will be
				// claimed again: at least once, never lost.
				d.log.Error("write outcomes: giving up", logkey.Count, len(outcomes), logkey.Try, try, logkey.Error, err)
				break
			}
			d.log.Warn("write outcomes: trying again", logkey.Count, len(outcomes), logkey.Try, try, logkey.Error, err)
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
			wait = min(2*wait, outcomeRetryMax)
		}
		for i, ok := range applied {
			if !ok {
				d.log.Warn("outcome not applied: lease no longer held",
					logkey.DeliveryID, outcomes[i].DeliveryID)
			}
		}
	}
	if len(releases) > 0 {
		err := d.cfg.Store.DeliveryRelease(ctx, &store.DeliveryReleaseParams{
			Leases: releases,
			Now:    d.cfg.Clock.StoreNow(),
		})
		if err != nil && !errors.Is(err, context.Canceled) {
			d.log.Error("release leases", logkey.Count, len(releases), logkey.Error, err)
		}
	}
	return applied
}

// signsUnder reports whether secret can sign under scheme. A previous
// secret kept through a rotation may not: an endpoint rotated to a new
// secret and then switched to another scheme keeps the old secret, which
// the new scheme cannot use. That secret's overlap ends there (its
// receiver could not check its signature under the new scheme anyway)
// instead of failing every attempt as a configuration fault.
func signsUnder(scheme herald.SignatureScheme, secret string) bool {
	var err error
	switch scheme {
	case herald.SchemeEd25519:
		_, err = verify.SignEd25519(secret, "check", 0, nil)
	case herald.SchemeHMACSHA256:
		return secret != ""
	default:
		_, err = verify.SignStandard(secret, "check", 0, nil)
	}
	return err == nil
}
