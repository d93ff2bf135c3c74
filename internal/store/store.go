// Package store is the storage seam: one interface, implemented by the
// embedded SQLite backend (sqlitestore) and the shared PostgreSQL backend
// (pgstore), both held to the same conformance suite (storetest).
//
// Rules every backend follows:
//   - Each method owns its transaction; callers never hold one. A method
//     that returns an error has committed nothing, and once it has
//     committed it does not return an error.
//   - Time arrives in the params as Now. The zero time means "use the
//     database clock", so several nodes with skewed clocks agree on leases
//     and due times; tests pass their test clock's time.
//   - Only domain types cross the seam; driver types never do.
//   - Payloads are stored and returned as the exact bytes accepted.
package store

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/breaker"
	"github.com/heraldhooks/herald/internal/ratelimit"
)

// Errors a backend returns, wrapped with what was asked.
var (
	// ErrNotFound: no row has that id (or it belongs to no one).
	ErrNotFound = errors.New("not found")
	// ErrConflict: the row exists but its state forbids the operation, such
	// as replaying a pending delivery or cancelling a delivered one.
	ErrConflict = errors.New("conflict")
)

// Store is everything Herald keeps. All methods are safe for concurrent use.
//
// A method's input takes its shape by one rule:
//   - A read of the one row a key names takes (ctx, id string): the row's
//     id, or the key it is kept under when it has none (an event type's
//     name, a setting's key, a consumer's id for its notification
//     addresses).
//   - A method with no input takes (ctx).
//   - Every other method takes (ctx, p *XxxParams), Xxx the method's name:
//     every write, every list, every read that takes more than a key. An
//     input added later (a Now, a Limit, a filter) is then a field, not a
//     new signature for every backend and caller.
//
// Close, which ends the store, takes nothing (io.Closer). A capability
// that is no part of the seam (leasing at ingest: Leaser) is an interface
// of its own, which the app finds by a type assertion. A consumer that
// needs part of the seam takes an interface of that part alone: one it
// declares itself (dispatch.Store, metrics.Store), or one of the nouns'
// below (APIKeyStore, DepthStore, ...).
//
// The queries each backend answers for a rule above the seam follow it
// too: EndpointRanker's take a RankQuery.
type Store interface {
	// Migrate applies the embedded numbered migrations not yet applied.
	// On PostgreSQL it holds an advisory lock so nodes starting together
	// migrate once.
	Migrate(ctx context.Context) error
	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	// Close releases connections and ends subscriptions.
	Close() error
	// Subscribe returns a channel that receives a value (coalesced; a slow
	// reader misses none that matter, since one value means "look again")
	// whenever deliveries may have become due through another caller:
	// ingest, replay, release, enable, and an outcome that schedules a
	// retry due within SoonRetry. A commit made after Subscribe returns
	// is signalled. The channel is closed when ctx ends.
	// PostgreSQL uses LISTEN/NOTIFY, so wake-ups cross nodes; SQLite signals
	// in process.
	Subscribe(ctx context.Context) (<-chan struct{}, error)

	// SettingGet returns a stored setting, or ErrNotFound.
	SettingGet(ctx context.Context, key string) (string, error)
	// SettingPutIfAbsent stores p.Value under p.Key unless the key is set,
	// and returns the value that is stored after the call.
	SettingPutIfAbsent(ctx context.Context, p *SettingPutIfAbsentParams) (string, error)

	EndpointCreate(ctx context.Context, p *EndpointCreateParams) (*herald.Endpoint, error)
	EndpointGet(ctx context.Context, id string) (*herald.Endpoint, error)
	EndpointList(ctx context.Context, p *EndpointListParams) (*Page[*herald.Endpoint], error)
	// EndpointUpdate replaces the endpoint's settings (everything but id,
	// consumer, secret, enabled and created_at) with those of p.Endpoint.
	EndpointUpdate(ctx context.Context, p *EndpointUpdateParams) (*herald.Endpoint, error)
	// EndpointDelete removes the endpoint; its live (pending or delivering)
	// deliveries become cancelled, and its history stays.
	EndpointDelete(ctx context.Context, p *EndpointDeleteParams) error
	// EndpointSetEnabled enables or disables the endpoint. Disabling sends
	// its live deliveries dead with reason endpoint_disabled, in the same
	// transaction, so they can be replayed once it is enabled again.
	// Enabling starts its health afresh (herald.NewEndpointHealth): a
	// re-enabled endpoint is not judged by the streak that disabled it.
	EndpointSetEnabled(ctx context.Context, p *EndpointSetEnabledParams) (*herald.Endpoint, error)
	// EndpointRotateSecret sets a new secret and keeps the old one signing
	// until p.PreviousValidFor has passed.
	EndpointRotateSecret(ctx context.Context, p *EndpointRotateSecretParams) (*herald.Endpoint, error)

	// EventIngest writes the events and one delivery per enabled endpoint of
	// each event's consumer whose filter matches, all in one transaction
	// (invariant 1). An event whose idempotency key the consumer used before
	// (or earlier in the same call) creates nothing and comes back as the
	// first event with Duplicate set.
	EventIngest(ctx context.Context, p *EventIngestParams) ([]EventIngestResult, error)
	EventGet(ctx context.Context, id string) (*herald.Event, error)
	EventList(ctx context.Context, p *EventListParams) (*Page[*herald.Event], error)
	// EventSkipList returns the endpoints an event's fan-out skipped by
	// their filters, and why, by endpoint id; none for an event without.
	EventSkipList(ctx context.Context, eventID string) ([]EventSkip, error)
	// EventPurge is one batch of a purge pass (--retention): it looks at up
	// to p.Limit events created before the cutoff (Now - Retention), in
	// creation order from p.After, and deletes, in one short transaction,
	// those whose deliveries all ended before the cutoff (or that have
	// none), with their deliveries and attempts. An event with a live
	// delivery, or one that ended since the cutoff, stays, and so do all
	// its deliveries. The walk follows an index of events by creation, and
	// each event costs an index probe of its deliveries: a batch never
	// scans a table. On PostgreSQL one node purges at a time (a
	// transaction-scoped advisory lock, tried, never waited for): another
	// node's batch comes back Busy. Deliveries another transaction holds
	// (a replay under way) keep their event until a later pass; a replay
	// that comes after the purge finds the delivery gone (ErrNotFound).
	EventPurge(ctx context.Context, p *EventPurgeParams) (PurgeResult, error)

	// DeliveryClaim takes up to p.Limit due deliveries (pending and due, or
	// delivering with an expired lease, which come back Redelivered), marks
	// them delivering under a new lease token and returns them, oldest due
	// first, with their event and endpoint (Health included). Each lease lasts twice the endpoint
	// timeout plus p.LeaseMargin (invariant 10). Concurrent claimers, on any
	// node, never get the same delivery (FOR UPDATE SKIP LOCKED on
	// PostgreSQL).
	//
	// A claim protects endpoints and shares the work fairly (DESIGN.md):
	//   - Only enabled endpoints, not paused by a Retry-After, whose breaker
	//     lets work through (breaker.GateAt): a closed breaker sets no limit;
	//     after the open period exactly one probe is claimed and the breaker
	//     becomes half-open (breaker.Probing, with the probe's lease expiry).
	//   - Per endpoint, at most ratelimit.Allowance deliveries: the in-flight
	//     cap counts the endpoint's deliveries leased on every node, and the
	//     token bucket (kept in the store, spent by ratelimit.Take) limits
	//     the rate across nodes. Deliveries that find no room stay pending
	//     and due; they spend no attempt (invariant 4).
	//   - Fairness: endpoints with due work are taken in random order and
	//     p.Limit is dealt out one delivery per endpoint per round, so one
	//     endpoint's backlog of millions cannot starve another's single
	//     delivery. Within an endpoint, new deliveries (attempt_count 0) go
	//     before retries, then oldest due first.
	//   - FIFO endpoints (Ordering fifo) give at most their head: the live
	//     (pending or delivering) delivery ingested first, and only when it
	//     is due and none of the endpoint's deliveries is in flight.
	//   - Bounded redelivery: each delivery taken from an expired lease
	//     counts one more lost lease, and one whose count reaches
	//     p.MaxLeaseLosses (LeaseLossesEnd) is not returned: the claim ends
	//     it dead (herald.DeadLeaseLost) in its transaction and ingests its
	//     herald.delivery.dead (LeaseLostNotification), reported to
	//     p.Notify once committed. A replay starts the count afresh.
	DeliveryClaim(ctx context.Context, p *DeliveryClaimParams) ([]*ClaimedDelivery, error)
	// DeliveryNextDue says how long from Now until the earliest live
	// delivery falls due that is not due yet: a pending delivery's next
	// attempt, or a leased one's lease expiry (NextDue.Wait; Found is false
	// when none is still to come). Deliveries already due (waiting for a
	// breaker, a pause or room) are not counted there: a claim just found
	// them not claimable. They are what NextDue.DueNow reports. An idle
	// dispatcher sleeps until then, instead of finding a retry only at its
	// next poll, and heeds the outcomes it writes (which free room under an
	// in-flight cap, or move a FIFO head) only while DueNow: otherwise
	// there is nothing they could let a claim take. It reads the due index
	// at Now, so it costs two index probes whatever the history kept.
	DeliveryNextDue(ctx context.Context, p *DeliveryNextDueParams) (NextDue, error)
	// EndpointQueueTidy keeps the endpoint queue, where claims find the
	// endpoints with due work, small: for up to p.Limit endpoints marked
	// due at p.Now (drawn at random), it moves the mark to the endpoint's
	// earliest live due time, or removes it when nothing of the endpoint's
	// is live. Anything that makes a delivery pending lowers the mark again
	// in its own transaction, so a tidy never hides due work: an endpoint
	// being written to while the tidy runs is left marked (on PostgreSQL it
	// skips the endpoints a writer holds, and waits for none). It says how
	// many marks it moved or removed. Dispatchers call it when they are
	// caught up, at most every TidyInterval; without it claims stay correct
	// but an endpoint that once had work would be looked at by every claim.
	EndpointQueueTidy(ctx context.Context, p *EndpointQueueTidyParams) (int, error)
	// DeliveryCompleteMany records each outcome's attempt and, where the
	// delivery is still delivering under that lease token, applies the
	// outcome. It reports for each outcome whether it was applied; a stale
	// lease (the delivery was reclaimed, cancelled or disabled since) is not
	// an error, the outcome is just not applied (invariant 10): the attempt
	// is logged, but the delivery's status, attempt count and last result
	// stay, and its DisableEndpoint is ignored.
	//
	// In the same transaction, each applied outcome updates its endpoint's
	// health through breaker.Config.Observe (breaker.Default thresholds;
	// the window counts the endpoint's attempts over the last 10 minutes,
	// fetched only when breaker.NeedsWindow says so), in the order given;
	// a success that changes nothing but LastSuccessAt, within
	// LastSuccessPrecision of the one kept, is not written.
	// What follows is written too: an endpoint to disable (Effects.Disable,
	// or DisableEndpoint) is disabled as EndpointSetEnabled does, and
	// notification events are ingested for the endpoint's consumer exactly
	// as EventIngest would (fan-out to its matching endpoints):
	// herald.endpoint.failing (Effects.NotifyFailing),
	// herald.endpoint.recovered (Effects.NotifyRecovered),
	// herald.endpoint.disabled (whenever the outcome disables the endpoint)
	// and herald.delivery.dead (an outcome that goes dead), with the payload
	// types of the herald package. An outcome for a delivery of a
	// notification event (herald.IsNotification) updates health but emits
	// no notification, so notifications cannot loop.
	//
	// An endpoint is disabled once every outcome of the call is applied:
	// its later outcomes in the batch still apply (a delivery that arrived
	// stays delivered; one put back to pending then goes dead with the
	// endpoint's other live deliveries), but are not observed, and emit
	// nothing.
	DeliveryCompleteMany(ctx context.Context, p *DeliveryCompleteManyParams) ([]bool, error)
	// DeliveryRelease puts leased deliveries back to pending, due now,
	// spending no attempt: a node shutting down hands its work back.
	DeliveryRelease(ctx context.Context, p *DeliveryReleaseParams) error
	DeliveryGet(ctx context.Context, id string) (*herald.Delivery, error)
	DeliveryList(ctx context.Context, p *DeliveryListParams) (*Page[*herald.Delivery], error)
	// DeliveryReplay brings one terminal delivery back to pending, due now,
	// with a fresh attempt budget; its attempt log stays. A live delivery
	// gives ErrConflict, and so does one whose endpoint is disabled or gone.
	DeliveryReplay(ctx context.Context, p *DeliveryReplayParams) (*herald.Delivery, error)
	// DeliveryReplayMany replays every delivery that matches the filter and
	// can be replayed (terminal, endpoint enabled), and says how many. With
	// p.DryRun it changes nothing and says how many it would replay. With
	// p.Rate > 0 the replayed deliveries are paced: the i-th (from 0, in
	// the order they were created) is due at Now + i/Rate seconds, so a
	// recovered endpoint is not flooded.
	DeliveryReplayMany(ctx context.Context, p *DeliveryReplayManyParams) (int, error)
	// DeliveryCancel makes a pending or delivering delivery cancelled; an
	// attempt in flight then finds its lease gone. Terminal ones give
	// ErrConflict.
	DeliveryCancel(ctx context.Context, p *DeliveryCancelParams) (*herald.Delivery, error)
	// EndpointHealthGet returns the endpoint's health with SuccessRate1h and
	// Attempts1h computed over the hour before p.Now.
	EndpointHealthGet(ctx context.Context, p *EndpointHealthGetParams) (*herald.EndpointHealth, error)
	// EndpointFigures returns, for each of p.IDs that names an endpoint
	// (ids of none, or of deleted ones, are left out of the map), its
	// health as kept, with the figures computed on request
	// (herald.EndpointHealth): Attempts1h and SuccessRate1h over the
	// newest attempts made in (Now - 1h, Now], InFlight (leases that have
	// not expired by Now), Due (live deliveries due by Now: pending and
	// due, or leased under an expired lease) and Dead. Each count stops at
	// p.CountLimit() (FigureLimit), which then means "at least that many", so one read
	// costs at most FigureLimit index entries per figure and endpoint,
	// whatever the endpoint's backlog or history: a page of the dashboard
	// costs in proportion to the page. One statement answers the whole
	// call, so the figures are of one moment.
	EndpointFigures(ctx context.Context, p *EndpointFiguresParams) (map[string]*herald.EndpointHealth, error)
	// AttemptList lists a delivery's attempts, oldest first.
	AttemptList(ctx context.Context, p *AttemptListParams) (*Page[*herald.Attempt], error)

	// Stats counts deliveries by status and measures the due queue, of
	// every consumer or of p.ConsumerID alone. Counting by status costs
	// every delivery kept; with p.QueueOnly it is left out, and what is
	// left costs the live deliveries and the dead ones (an index range
	// each), not the history.
	Stats(ctx context.Context, p *StatsParams) (*Stats, error)

	// APIKeyStore keeps the API keys made through /v1/api-keys (apikey.go).
	APIKeyStore

	// SecretStore keeps endpoint secrets sealed at rest (secrets.go).
	SecretStore

	// PortalSessionStore keeps portal links and sessions (portal.go).
	PortalSessionStore

	// EventTypeStore keeps the event type catalog (eventtype.go).
	EventTypeStore

	// OperatorSessionStore keeps operator dashboard sessions
	// (operatorsession.go).
	OperatorSessionStore

	// ActivityStore keeps the per-minute activity series the outcome
	// writes add to (activity.go).
	ActivityStore

	// DepthStore keeps the queue's depth sampled once a minute
	// (depth.go).
	DepthStore

	// NoticeStore keeps the consumers' notification addresses and when
	// each endpoint was last mailed about (notice.go).
	NoticeStore

	// QuotaStore counts what each consumer spent of its quotas (test
	// events, confirmation mails) across nodes (quota.go).
	QuotaStore

	// RequestBucketStore keeps the token buckets of the API's request
	// limits that all nodes share (requestbucket.go).
	RequestBucketStore
}

// SettingPutIfAbsentParams asks to store Value under Key unless the key is
// set. An empty Value is a value.
type SettingPutIfAbsentParams struct {
	Key   string
	Value string
}

// Page is one page of a list. NextCursor is empty on the last page; passed
// back as Cursor it gives the page after. Lists of endpoints, events and
// deliveries run newest first; attempts oldest first. The order is by id,
// so it is stable while rows are added.
type Page[T any] struct {
	Items      []T
	NextCursor string
}

// MaxListLimit bounds every list; a Limit of 0 means DefaultListLimit.
const (
	DefaultListLimit = 50
	MaxListLimit     = 1000
)

// EndpointCreateParams creates Endpoint. ID, when empty, is made by the
// store (an ID already taken gives ErrConflict); Secret must be set by the
// caller; Enabled and DisabledReason are stored as given; CreatedAt and
// UpdatedAt are set from Now.
type EndpointCreateParams struct {
	Endpoint *herald.Endpoint
	Now      time.Time
}

// EndpointListParams filters endpoints; an empty ConsumerID lists all.
// Sort orders them (EndpointSortNewest when empty); a Cursor is only good
// for the Sort that made it. Now is the time the ranked orders (health,
// due) read their figures at.
type EndpointListParams struct {
	ConsumerID string
	Sort       EndpointSort
	Cursor     string
	Limit      int
	Now        time.Time
}

// EndpointSort is an order of an endpoint list. Ties go by id, in the
// same direction, and a leading "-" reverses an order.
//
// The orders by creation, consumer and URL are each an index's, with or
// without a consumer filter, so a page costs one index range whatever the
// number of endpoints.
//
// The orders by health, due and dead (EndpointSortHealth,
// EndpointSortHealthDesc, EndpointSortDue, EndpointSortDead) go by
// figures no column holds. Each splits the endpoints in two: the few that
// need attention, ranked, and the rest, in id order; a page costs what
// needs attention (endpoints failing, due or dead), never the number of
// endpoints or of deliveries (endpointsort.go says how).
type EndpointSort string

// The endpoint orders.
const (
	// EndpointSortNewest: newest first (by id, which grows with time).
	EndpointSortNewest EndpointSort = "-created"
	// EndpointSortOldest: oldest first.
	EndpointSortOldest EndpointSort = "created"
	// EndpointSortConsumer: by consumer id, A to Z.
	EndpointSortConsumer     EndpointSort = "consumer"
	EndpointSortConsumerDesc EndpointSort = "-consumer"
	// EndpointSortURL: by URL, A to Z (byte order).
	EndpointSortURL     EndpointSort = "url"
	EndpointSortURLDesc EndpointSort = "-url"
	// EndpointSortHealth: worst health first. First the endpoints scoring 0
	// (disabled, or breaker open) and those with a half-open breaker or a
	// failed attempt in the last hour, by herald.HealthScore from the
	// lowest (ties by id; those of them with no score after the scored),
	// then every other endpoint, in id order: those failed no attempt in
	// the last hour, which score 100 or have no score.
	EndpointSortHealth EndpointSort = "health"
	// EndpointSortHealthDesc: best health first, the exact reverse of
	// EndpointSortHealth.
	EndpointSortHealthDesc EndpointSort = "-health"
	// EndpointSortDue: the endpoints with deliveries due now first, the one
	// whose work has waited longest first (by its due mark in the endpoint
	// queue, no later than its oldest due delivery, and equal to it once
	// the queue is tidied: Store.EndpointQueueTidy), then every other
	// endpoint, oldest first (by id).
	EndpointSortDue EndpointSort = "due"
	// EndpointSortDead: the most dead deliveries first, then the
	// endpoints with none; ties, and those with none, newest first.
	EndpointSortDead EndpointSort = "-dead"
)

// EndpointSorts lists every EndpointSort, the default first.
func EndpointSorts() []EndpointSort {
	return []EndpointSort{EndpointSortNewest, EndpointSortOldest, EndpointSortConsumer,
		EndpointSortConsumerDesc, EndpointSortURL, EndpointSortURLDesc,
		EndpointSortHealth, EndpointSortHealthDesc, EndpointSortDue, EndpointSortDead}
}

// Valid reports whether s is one of EndpointSorts (or empty, the default).
func (s EndpointSort) Valid() bool {
	if s == "" {
		return true
	}
	for _, v := range EndpointSorts() {
		if s == v {
			return true
		}
	}
	return false
}

// Key is what s orders by first ("created", "consumer", "url", "health",
// "due" or "dead"), and whether it runs descending.
func (s EndpointSort) Key() (key string, desc bool) {
	if s == "" {
		s = EndpointSortNewest
	}
	k, desc := strings.CutPrefix(string(s), "-")
	return k, desc
}

// SortCursor is the cursor of an endpoint list sorted by a key other than
// creation: the last endpoint's key (base64url, so any text fits) and id.
func SortCursor(key, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(key)) + "." + id
}

// ParseSortCursor reads a SortCursor; ok is false when c is not one.
func ParseSortCursor(c string) (key, id string, ok bool) {
	k, id, found := strings.Cut(c, ".")
	if !found || id == "" {
		return "", "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(k)
	if err != nil || base64.RawURLEncoding.EncodeToString(b) != k {
		return "", "", false
	}
	return string(b), id, true
}

// EndpointCursor is the cursor that continues a list sorted by s after ep,
// for the sorts by a column (see Ranked; a ranked sort's cursor is a
// RankCursor).
func EndpointCursor(s EndpointSort, ep *herald.Endpoint) string {
	switch key, _ := s.Key(); key {
	case "consumer":
		return SortCursor(ep.ConsumerID, ep.ID)
	case "url":
		return SortCursor(ep.URL, ep.ID)
	}
	return ep.ID
}

// ErrInvalidCursor: a list's cursor is not one that list made.
var ErrInvalidCursor = errors.New("invalid cursor")

// EndpointFiguresParams names the endpoints whose figures to read (at most
// MaxListLimit), and the time they are read at. Limit is where counting
// stops (0: FigureLimit).
type EndpointFiguresParams struct {
	IDs   []string
	Now   time.Time
	Limit int
}

// CountLimit is p.Limit, or FigureLimit when it is not positive.
func (p *EndpointFiguresParams) CountLimit() int {
	if p.Limit <= 0 {
		return FigureLimit
	}
	return p.Limit
}

// FigureLimit is where EndpointFigures stops counting: a figure of
// FigureLimit means at least that many.
const FigureLimit = 1_000

// EndpointUpdateParams carries the endpoint's new settings; Endpoint.ID
// names the endpoint.
type EndpointUpdateParams struct {
	Endpoint *herald.Endpoint
	Now      time.Time
}

// EndpointDeleteParams names the endpoint to delete.
type EndpointDeleteParams struct {
	ID  string
	Now time.Time
}

// EndpointSetEnabledParams enables or disables an endpoint. Reason is kept
// as its DisabledReason when disabling ("gone" for a 410, say).
type EndpointSetEnabledParams struct {
	ID      string
	Enabled bool
	Reason  string
	Now     time.Time
}

// EndpointRotateSecretParams sets NewSecret; the old secret keeps signing
// for PreviousValidFor after Now.
type EndpointRotateSecretParams struct {
	ID               string
	NewSecret        string
	PreviousValidFor time.Duration
	Now              time.Time
}

// EventIngestParams carries the events of one ingest call (one or a batch).
type EventIngestParams struct {
	Events []EventIngestItem
	Now    time.Time
}

// EventIngestItem is one event to ingest. The store makes its id.
type EventIngestItem struct {
	ConsumerID     string
	EventType      string
	Payload        []byte
	IdempotencyKey string // optional; unique per consumer
	// EndpointID, when set, sends the event to that endpoint only, whatever
	// its filter: a test event (POST /v1/endpoints/{id}/test). The endpoint
	// must be an enabled endpoint of ConsumerID; otherwise the event is
	// written with no delivery.
	EndpointID string
	// TraceContext is the ingest span's context (herald.Event.TraceContext),
	// stored with the event; nil when tracing is off, and then the store
	// writes the event exactly as before.
	TraceContext []byte
}

// EventIngestResult is the answer for one ingested event.
type EventIngestResult struct {
	Event      *herald.Event
	Duplicate  bool
	Deliveries []DeliveryRef
	// Skips are the endpoints the event would have gone to but for their
	// filters (filter.Decide), in fan-out order; nil when none. A
	// duplicate's are not read again: nil.
	Skips []EventSkip
}

// EventSkip is an endpoint an event's fan-out skipped, and why
// (filter.ReasonFilter, filter.ReasonFilterError).
type EventSkip struct {
	EndpointID string
	Reason     string
}

// DeliveryRef names a delivery and its endpoint.
type DeliveryRef struct {
	ID         string
	EndpointID string
}

// EventListParams filters events; empty fields do not filter. Since and
// Until bound created_at (Since inclusive, Until exclusive).
type EventListParams struct {
	ConsumerID string
	EventType  string
	Since      time.Time
	Until      time.Time
	Cursor     string
	Limit      int
}

// DeliveryClaimParams asks for up to Limit due deliveries.
type DeliveryClaimParams struct {
	Limit int
	// LeaseMargin is added to twice the endpoint timeout for each lease.
	LeaseMargin time.Duration
	Now         time.Time
	// MaxLeaseLosses is how many times a delivery's lease may be lost
	// before the claim that finds it lost again ends it dead
	// (herald.DeadLeaseLost) instead of handing it out; 0 means
	// herald.DefaultMaxLeaseLosses (LeaseLossesEnd).
	MaxLeaseLosses int
	// Notify, when set, is called once the claim has committed with each
	// notification it ingested (herald.delivery.dead of the deliveries it
	// ended dead), as DeliveryCompleteManyParams.Notify is. It must not
	// block.
	Notify func(herald.Notification)
}

// EndpointQueueTidyParams asks for a tidy of up to Limit due marks at Now.
type EndpointQueueTidyParams struct {
	Now   time.Time
	Limit int
}

// TidyInterval is how often at most a caught-up dispatcher tidies the
// endpoint queue (Store.EndpointQueueTidy), and TidyLimit how many marks
// one tidy looks at: enough to keep up with endpoints falling idle, small
// enough that a tidy is one short transaction.
const (
	TidyInterval = time.Second
	TidyLimit    = 256
)

// DeliveryNextDueParams asks for the next due time after Now.
type DeliveryNextDueParams struct {
	Now time.Time
}

// NextDue is what Store.DeliveryNextDue read at its Now.
type NextDue struct {
	// Wait is how long until the earliest live delivery not yet due falls
	// due; Found says whether there is one.
	Wait  time.Duration
	Found bool
	// DueNow says whether a live delivery is due at Now and not under an
	// unexpired lease: work that a claim left, or that arrived since.
	DueNow bool
}

// SoonRetry is how near a retry must fall due for the outcome write that
// schedules it to wake every node's dispatcher (Subscribe): an idle node
// then learns of it at once, rather than at its next poll.
const SoonRetry = time.Second

// LeaseFor is how long a claim leases a delivery to ep: twice its timeout
// (the default when unset) plus LeaseMargin, so that the lease outlives the
// attempt (invariant 10).
func (p *DeliveryClaimParams) LeaseFor(ep *herald.Endpoint) time.Duration {
	return 2*AttemptTimeout(ep) + p.LeaseMargin
}

// AttemptTimeout is the longest one attempt to ep may last: its timeout,
// or herald.DefaultTimeout when unset, as the sender applies it.
func AttemptTimeout(ep *herald.Endpoint) time.Duration {
	if ep.Timeout <= 0 {
		return herald.DefaultTimeout
	}
	return ep.Timeout
}

// ClaimedDelivery is a delivery under lease, with what the sender needs.
type ClaimedDelivery struct {
	Delivery herald.Delivery
	Event    herald.Event
	Endpoint herald.Endpoint
	// LeaseToken fences the claim: only writes carrying it apply.
	LeaseToken     int64
	LeaseExpiresAt time.Time
	// Redelivered says this claim took the delivery from an expired lease
	// (it was delivering, and the node holding it died, froze or lost its
	// database before writing an outcome), not from pending: the earlier
	// attempt may have reached the receiver, so this one may be a
	// duplicate. A retry written normally, or a lease handed back
	// (DeliveryRelease), leaves the delivery pending, and its next claim
	// is not a redelivery.
	Redelivered bool
	// LeaseLosses is how many of the delivery's leases were lost (this
	// claim's count included when Redelivered) since it was ingested or
	// last replayed. A lease handed back (DeliveryRelease) keeps it, so a
	// dispatcher can tell a suspect (one that may kill its node) however
	// it was last handed back.
	LeaseLosses int
}

// A Taker is this node's dispatcher, which a store may lease deliveries
// to as they are ingested (a Leaser), so that they go out without a
// claim. A store leases at ingest only what a claim would take
// at once: deliveries of endpoints that are not FIFO, have no rate limit,
// whose breaker is closed and that are not paused or slowed down, within
// the room their in-flight cap leaves beside their leases and the new
// deliveries already due; the rest is queued, and the dispatchers woken,
// as ever.
type Taker interface {
	// Reserve sets aside up to n of the taker's free attempt slots for an
	// ingest, none when it is not running. The taker counts the lease of
	// what the ingest leases from Reservation.From, read before the ingest
	// began, as a claim's is from before the claim; the store's lease runs
	// out no earlier (counted from the ingest's own time, or from From
	// if that is later). A taker may reserve nothing while many attempts
	// are under way, when claims, many deliveries to a statement, cost
	// less than leasing each ingest's few.
	Reserve(n int) Reservation
	// ReserveBatch is Reserve for an ingest that leases many deliveries to
	// a statement (SQLite's group commit, whose leases ride the
	// transaction that writes the deliveries anyway), which costs no more
	// than a claim at any load: no bound on the attempts under way.
	ReserveBatch(n int) Reservation
	// Take hands over what the ingest of r leased (no more than r.Slots,
	// perhaps none, and none when the ingest failed), and gives back the
	// slots it leaves free. Each reservation is taken exactly once.
	Take(r Reservation, claimed []*ClaimedDelivery)
}

// A LockCounter is a store whose writers can find a row another writer
// holds, and then write again rather than wait: PostgreSQL, where an
// outcome write riding an ingest finds an endpoint a claim holds. It is a
// capability beside Store, for the metrics; SQLite's one writer never
// meets another's lock and is not one.
type LockCounter interface {
	// LockConflicts is how many writes met a lock and were written again
	// since the store was opened.
	LockConflicts() int64
}

// A Leaser is a store that leases deliveries at ingest to a Taker. It is
// a capability beside Store, not part of it (this node's dispatcher is
// not part of the storage seam), which the app finds by a type
// assertion; both backends are Leasers, and a store that is not one
// queues every delivery.
type Leaser interface {
	// SetTaker makes ingests on this store lease what they may to t;
	// nil stops it.
	SetTaker(t Taker)
}

// TakerSlot holds the Taker a store leases to at ingest (SetTaker of
// pgstore and sqlitestore), set and read concurrently. Its zero value
// holds none.
type TakerSlot struct{ p atomic.Pointer[takerBox] }

// takerBox holds a Taker for an atomic.Pointer.
type takerBox struct{ t Taker }

// Set makes t the taker; nil stops leasing.
func (s *TakerSlot) Set(t Taker) {
	if t == nil {
		s.p.Store(nil)
		return
	}
	s.p.Store(&takerBox{t: t})
}

// Get returns the taker, or nil.
func (s *TakerSlot) Get() Taker {
	if box := s.p.Load(); box != nil {
		return box.t
	}
	return nil
}

// LeasableAtIngest says whether a claim at now could start a delivery to
// ep without writing anything of ep's back, so that an ingest may lease
// to a Taker: not FIFO (whose head rule the claim applies), no rate limit
// (whose bucket it spends), breaker closed (a probe is written back), not
// paused, not slowed down by 429s, room under the cap as far as the row
// tells (the store counts the leases).
func LeasableAtIngest(ep *herald.Endpoint, b ratelimit.Bucket, now time.Time) bool {
	return ep.Enabled && ep.Ordering != herald.OrderingFIFO &&
		(ep.RateLimit == nil || ep.RateLimit.PerSecond <= 0) &&
		(ep.Health.RateFactor <= 0 || ep.Health.RateFactor >= 1) &&
		breaker.GateAt(&ep.Health, now) == breaker.Flowing &&
		ratelimit.Allowance(ep, &ep.Health, b, 0, now) > 0
}

// Reservation is attempt slots a Taker set aside for an ingest.
type Reservation struct {
	Slots int
	// From is the taker's clock when it reserved them.
	From time.Time
	// LeaseMargin is DeliveryClaimParams.LeaseMargin for the leases.
	LeaseMargin time.Duration
	// Ref is the taker's own, to know its reservations by.
	Ref any
}

// Lease names one claim of a delivery.
type Lease struct {
	DeliveryID string
	LeaseToken int64
}

// DeliveryOutcome is what one attempt of a claimed delivery came to.
type DeliveryOutcome struct {
	Lease
	// Attempt is logged whatever happens to the delivery. The store makes
	// its id when empty and fills DeliveryID and EndpointID.
	Attempt herald.Attempt
	// Status is delivered, dead, or pending for a retry.
	Status herald.Status
	// RetryIn is, for pending, how long after Now the next attempt is due.
	RetryIn time.Duration
	// DeadReason is set when Status is dead.
	DeadReason herald.DeadReason
	// DisableEndpoint also disables the endpoint with this reason (a 410
	// gives "gone"), in the same transaction, sending its other live
	// deliveries dead (endpoint_disabled) as EndpointSetEnabled does. Only
	// an applied outcome disables: a stale one may predate an operator's
	// re-enable.
	DisableEndpoint string
	// PauseFor is a Retry-After from a 429 or 503: the whole endpoint
	// pauses that long (breaker.Result.PauseFor).
	PauseFor time.Duration
	// Throttled is a 429 without Retry-After: the endpoint slows down
	// (breaker.Result.Throttled).
	Throttled bool
}

// LastSuccessPrecision is how close an endpoint's LastSuccessAt is kept:
// a success on an endpoint whose health it changes in nothing else is not
// written while the success kept is more recent than this, so a busy
// endpoint's row is not rewritten (nor locked) for every delivery.
const LastSuccessPrecision = time.Second

// DeliveryCompleteManyParams carries a batch of outcomes.
type DeliveryCompleteManyParams struct {
	Outcomes []DeliveryOutcome
	Now      time.Time
	// Notify, when set, is called once the call has committed with each
	// notification it ingested, in order (the same moments as the
	// herald.* events, whether or not an endpoint subscribes to them). A
	// call that fails calls it for none. It must not block: it runs on
	// the caller's goroutine, on the path of every outcome write.
	Notify func(herald.Notification)
}

// DeliveryReleaseParams hands leases back.
type DeliveryReleaseParams struct {
	Leases []Lease
	Now    time.Time
}

// DeliveryListParams filters deliveries; empty fields do not filter.
type DeliveryListParams struct {
	Status     herald.Status
	EndpointID string
	ConsumerID string
	EventID    string
	// EventType, when set, keeps the deliveries of events of this exact
	// type.
	EventType string
	Cursor    string
	Limit     int
}

// DeliveryReplayParams names one delivery to replay.
type DeliveryReplayParams struct {
	ID  string
	Now time.Time
}

// DeliveryReplayManyParams selects deliveries to replay: those of EventID,
// or of EndpointID, with Status (a terminal status; empty means every
// terminal status) created in [Since, Until) where those are set. One of
// EventID and EndpointID must be set.
type DeliveryReplayManyParams struct {
	EventID    string
	EndpointID string
	Status     herald.Status
	Since      time.Time
	Until      time.Time
	// Rate paces the replay in deliveries per second (0: all due now).
	Rate float64
	// DryRun only counts.
	DryRun bool
	Now    time.Time
}

// EndpointHealthGetParams names the endpoint whose health to read.
type EndpointHealthGetParams struct {
	ID  string
	Now time.Time
}

// DeliveryCancelParams names one delivery to cancel.
type DeliveryCancelParams struct {
	ID  string
	Now time.Time
}

// AttemptListParams lists one delivery's attempts.
type AttemptListParams struct {
	DeliveryID string
	Cursor     string
	Limit      int
}

// StatsParams gives the time against which "due" is measured, and the
// consumer whose deliveries alone are counted (empty: every consumer's).
type StatsParams struct {
	ConsumerID string
	// QueueOnly leaves ByStatus out (nil): Pending, Delivering, DueNow,
	// OldestDueAge and DeadLetters only.
	QueueOnly bool
	Now       time.Time
}

// Stats describes the queue.
type Stats struct {
	// ByStatus counts deliveries in each status (every status is present),
	// unless QueueOnly was asked.
	ByStatus map[herald.Status]int64
	// DeadLetters counts dead deliveries (ByStatus' dead, read on its own
	// from the deliveries by status, so it walks no other status).
	DeadLetters int64
	// Pending and Delivering count the live deliveries (ByStatus' pending
	// and delivering), read from the indexes of live deliveries alone:
	// they cost the backlog and the attempts in flight, not the history.
	Pending, Delivering int64
	// DueNow counts pending deliveries whose time has come.
	DueNow int64
	// OldestDueAge is how long the oldest due delivery has waited (0 if none).
	OldestDueAge time.Duration
}

// ClampLimit turns a requested limit into one a list uses.
func ClampLimit(limit int) int {
	if limit <= 0 {
		return DefaultListLimit
	}
	if limit > MaxListLimit {
		return MaxListLimit
	}
	return limit
}
