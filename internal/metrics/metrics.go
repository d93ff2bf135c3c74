// Package metrics holds every Prometheus collector Herald exposes, and its
// name, in one place, and serves them at /metrics.
//
// A Metrics owns its own registry (never the global one), so two nodes in
// one process, as in the tests, count apart. The dispatcher and the API do
// not import Prometheus: the dispatcher reports through dispatch.Hooks, whose
// funcs are the methods of Metrics, and the API counts ingested events
// through the store it is given (CountIngest).
//
// No metric has a per-endpoint or per-consumer label: there may be millions
// of them, and a label value per endpoint would make a time series per
// endpoint. Per-endpoint health is in the API (/v1/stats and the endpoint
// views). Every label takes its values from a small fixed set, and the
// counters behind them are resolved once, in New, so recording an attempt
// costs a few atomic adds.
package metrics

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/logkey"
	"github.com/heraldhooks/herald/internal/notice"
	"github.com/heraldhooks/herald/internal/sender"
	"github.com/heraldhooks/herald/internal/store"
)

// The names of Herald's own metrics. The Go runtime (go_*) and process
// (process_*) collectors are registered too.
const (
	NameEventsIngested   = "herald_events_ingested_total"
	NameFilterErrors     = "herald_filter_errors_total"
	NameDeliveries       = "herald_deliveries_total"
	NameDeliveriesDead   = "herald_deliveries_dead_total"
	NameOutcomesStale    = "herald_outcomes_not_applied_total"
	NameRedelivered      = "herald_deliveries_redelivered_total"
	NameLeaseTooShort    = "herald_attempts_skipped_lease_expired_total"
	NameAttemptsFrozen   = "herald_attempts_frozen_total"
	NameAttempts         = "herald_attempts_total"
	NameAttemptDuration  = "herald_attempt_duration_seconds"
	NameDeliveryLatency  = "herald_delivery_latency_seconds"
	NameAttemptsInFlight = "herald_attempts_in_flight"
	NameQueueDue         = "herald_queue_due"
	NameQueueOldestDue   = "herald_queue_oldest_due_age_seconds"
	NameDeadLetterDepth  = "herald_dead_letter_depth"
	NameDeliveriesStatus = "herald_deliveries_by_status"
	NameQueueReadErrors  = "herald_queue_stats_errors_total"
	NamePurgedRows       = "herald_purged_rows_total"
	NameNoticesSent      = "herald_notices_sent_total"
	NameLockConflicts    = "herald_store_lock_conflicts_total"
	// NameRequestLimitFailedOpen counts takes from the request limits'
	// shared buckets that failed (api.Config.RequestLimitFailedOpen).
	NameRequestLimitFailedOpen = "herald_request_limit_failed_open_total"
)

// The values of the outcome label of herald_deliveries_total.
const (
	OutcomeDelivered = "delivered"
	OutcomeRetry     = "retry"
	OutcomeDead      = "dead"
)

// The values of the table label of herald_purged_rows_total.
const (
	TableEvents     = "events"
	TableDeliveries = "deliveries"
	TableAttempts   = "attempts"
)

// attemptBuckets suit webhook answers: most come in milliseconds, a slow
// receiver takes seconds, and no attempt lasts past the 60 s timeout cap.
var attemptBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// latencyBuckets run from a prompt first attempt (milliseconds) to a
// delivery that succeeded after a day of retries.
var latencyBuckets = []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600, 7200, 28800, 86400, 172800}

// Options tunes New; the zero value gives the defaults.
type Options struct {
	// Clock gives the time the queue gauges are measured against
	// (StoreNow: the database clock in production, the test clock in
	// tests). Default clock.Real.
	Clock clock.Clock
	// Logger receives failures to read the queue. Default: discard.
	Logger *slog.Logger
	// StatsTimeout bounds one read of the queue gauges (default 2 s). A
	// scrape never waits longer than this for the database.
	StatsTimeout time.Duration
	// StatsCacheFor is how long one read of the queue gauges serves later
	// scrapes (default 1 s), so that many scrapers cost the database one
	// query a second at most.
	StatsCacheFor time.Duration
}

// Metrics is every collector of one Herald node, in its own registry. Its
// methods are safe for concurrent use.
type Metrics struct {
	registry *prometheus.Registry
	handler  http.Handler

	eventsIngested prometheus.Counter
	filterErrors   prometheus.Counter

	delivered    prometheus.Counter
	retried      prometheus.Counter
	dead         prometheus.Counter
	deadByReason *prometheus.CounterVec
	deadReasons  map[herald.DeadReason]prometheus.Counter
	stale        prometheus.Counter
	redelivered  prometheus.Counter
	leaseShort   prometheus.Counter
	frozen       prometheus.Counter

	// attempts is indexed by sender.Class; index 0 (no class) is unused.
	attempts        [sender.ClientError + 1]prometheus.Counter
	attemptDuration prometheus.Histogram
	deliveryLatency prometheus.Histogram
	inFlight        prometheus.Gauge

	purgedEvents, purgedDeliveries, purgedAttempts prometheus.Counter

	notices *prometheus.CounterVec

	requestLimitFailedOpen prometheus.Counter

	queue *queueCollector
}

// New returns the metrics of a node whose queue lives in st.
func New(st Store, opts Options) *Metrics {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.StatsTimeout <= 0 {
		opts.StatsTimeout = 2 * time.Second
	}
	if opts.StatsCacheFor <= 0 {
		opts.StatsCacheFor = time.Second
	}
	m := &Metrics{registry: prometheus.NewRegistry()}

	m.eventsIngested = prometheus.NewCounter(prometheus.CounterOpts{
		Name: NameEventsIngested,
		Help: "Events accepted by the API and committed (idempotent duplicates excluded).",
	})
	m.filterErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: NameFilterErrors,
		Help: "Endpoints skipped at fan-out of an event the API accepted because their filter could not be evaluated on its payload (a missing field, a wrong type, the run-time cost limit).",
	})

	deliveries := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: NameDeliveries,
		Help: "Delivery outcomes written by this node's dispatcher: delivered, retry (scheduled again) or dead.",
	}, []string{"outcome"})
	m.delivered = deliveries.WithLabelValues(OutcomeDelivered)
	m.retried = deliveries.WithLabelValues(OutcomeRetry)
	m.dead = deliveries.WithLabelValues(OutcomeDead)

	m.deadByReason = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: NameDeliveriesDead,
		Help: "Deliveries this node's dispatcher sent dead, by reason: gone (410), client_error (other 4xx), exhausted (attempts spent) or lease_lost (its claims ended them: leases lost too often).",
	}, []string{"reason"})
	m.deadReasons = make(map[herald.DeadReason]prometheus.Counter)
	for _, r := range []herald.DeadReason{herald.DeadGone, herald.DeadClientError, herald.DeadExhausted, herald.DeadLeaseLost} {
		m.deadReasons[r] = m.deadByReason.WithLabelValues(string(r))
	}

	m.stale = prometheus.NewCounter(prometheus.CounterOpts{
		Name: NameOutcomesStale,
		Help: "Attempt outcomes the store did not apply: the lease was lost (the delivery was reclaimed, cancelled or its endpoint disabled) or the write failed.",
	})

	m.redelivered = prometheus.NewCounter(prometheus.CounterOpts{
		Name: NameRedelivered,
		Help: "Attempts started for a delivery whose earlier lease expired without an outcome (its node died, froze or lost the database mid-attempt): the receiver may get that webhook twice.",
	})

	m.frozen = prometheus.NewCounter(prometheus.CounterOpts{
		Name: NameAttemptsFrozen,
		Help: "Failed attempts not recorded because they outlived their timeout only as this node was stopped (froze, paused) while they ran: the lease was handed back, no attempt was spent and the endpoint's breaker counted nothing.",
	})

	m.leaseShort = prometheus.NewCounter(prometheus.CounterOpts{
		Name: NameLeaseTooShort,
		Help: "Attempts not sent because their lease would expire before they could end: the node stalled (froze, paused) between the claim and the attempt. The lease was handed back; no attempt was spent.",
	})

	attempts := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: NameAttempts,
		Help: "HTTP attempts made by this node, by class: success (2xx), retryable, gone (410) or client_error (other 4xx, or a request that could not be built).",
	}, []string{"class"})
	for _, c := range []sender.Class{sender.Success, sender.Retryable, sender.Gone, sender.ClientError} {
		m.attempts[c] = attempts.WithLabelValues(c.String())
	}

	m.attemptDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    NameAttemptDuration,
		Help:    "How long each HTTP attempt took, from request to the end of the answer read.",
		Buckets: attemptBuckets,
	})
	m.deliveryLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    NameDeliveryLatency,
		Help:    "From an event's acceptance to its delivery's successful attempt, retries included.",
		Buckets: latencyBuckets,
	})
	m.inFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: NameAttemptsInFlight,
		Help: "HTTP attempts in flight on this node.",
	})

	purged := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: NamePurgedRows,
		Help: "Rows this node's purge deleted once past --retention, by table: events, deliveries and attempts.",
	}, []string{"table"})
	m.purgedEvents = purged.WithLabelValues(TableEvents)
	m.purgedDeliveries = purged.WithLabelValues(TableDeliveries)
	m.purgedAttempts = purged.WithLabelValues(TableAttempts)

	m.notices = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: NameNoticesSent,
		Help: "Notices this node handled for mail (--smtp-url), by kind (failing, disabled, dead) and result: sent, failed (tried again later), limited (the endpoint was mailed about within the hour), no_address, unconfirmed (the address is not confirmed yet), dropped (queue full or retries spent); and the mails asking an address to confirm it (kind confirmation), sent or failed.",
	}, []string{"kind", "result"})
	for _, k := range notice.Kinds {
		for _, r := range notice.Results {
			m.notices.WithLabelValues(k, r)
		}
	}
	for _, r := range notice.ConfirmationResults {
		m.notices.WithLabelValues(notice.KindConfirmation, r)
	}

	queueErrors := prometheus.NewCounter(prometheus.CounterOpts{
		Name: NameQueueReadErrors,
		Help: "Failed or timed-out reads of the queue gauges; while a read fails the queue gauges are left out of the scrape.",
	})
	m.queue = newQueueCollector(st, opts, queueErrors)

	// Always there, so that a dashboard need not know the backend: 0 on
	// a store that is not a LockCounter (SQLite's one writer meets no
	// other's lock).
	lockConflicts := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: NameLockConflicts,
		Help: "Writes by this node that found a row another writer held and were written again rather than wait: on PostgreSQL, outcome writes riding an ingest that found their endpoint held by a claim. Always 0 on SQLite.",
	}, func() float64 {
		if lc, ok := st.(store.LockCounter); ok {
			return float64(lc.LockConflicts())
		}
		return 0
	})

	m.requestLimitFailedOpen = prometheus.NewCounter(prometheus.CounterOpts{
		Name: NameRequestLimitFailedOpen,
		Help: "API requests let through by this node's own request limit alone because the limit's bucket shared by all nodes could not be read (the database failed or was slow); while it grows, a key may make up to its limit on each node.",
	})

	m.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.eventsIngested, m.filterErrors, deliveries, m.deadByReason, m.stale, m.redelivered, m.leaseShort, m.frozen, attempts,
		m.attemptDuration, m.deliveryLatency, m.inFlight, purged, queueErrors, m.queue, m.notices,
		lockConflicts, m.requestLimitFailedOpen,
	)
	m.handler = promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{
		ErrorLog:      slogPrinter{opts.Logger},
		ErrorHandling: promhttp.ContinueOnError,
	})
	return m
}

// Handler serves the metrics in the Prometheus exposition format. It needs
// no API key, like /healthz: it shows counts, never data.
func (m *Metrics) Handler() http.Handler { return m.handler }

// Registry is the registry the metrics live in, for tests and for anything
// that wants to gather them without HTTP.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// EventsIngested adds n events accepted (duplicates excluded).
func (m *Metrics) EventsIngested(n int) {
	if n > 0 {
		m.eventsIngested.Add(float64(n))
	}
}

// FilterErrors adds n endpoints skipped for a filter that could not be
// evaluated (filter.ReasonFilterError).
func (m *Metrics) FilterErrors(n int) {
	if n > 0 {
		m.filterErrors.Add(float64(n))
	}
}

// AttemptsInFlight moves the in-flight gauge by delta (dispatch.Hooks.InFlight).
func (m *Metrics) AttemptsInFlight(delta int) { m.inFlight.Add(float64(delta)) }

// Redelivered counts a delivery a claim took from an
// expired lease (dispatch.Hooks.Redelivered).
func (m *Metrics) Redelivered(*store.ClaimedDelivery) { m.redelivered.Inc() }

// AttemptSkippedLeaseExpired counts an attempt not sent because its lease
// would not outlive it (dispatch.Hooks.LeaseTooShort).
func (m *Metrics) AttemptSkippedLeaseExpired(*store.ClaimedDelivery) { m.leaseShort.Inc() }

// AttemptFrozen counts a failed attempt handed back because its node was
// stopped while it ran (dispatch.Hooks.Frozen).
func (m *Metrics) AttemptFrozen(*store.ClaimedDelivery) { m.frozen.Inc() }

// AttemptDone counts one attempt by its class and observes its duration
// (dispatch.Hooks.AttemptDone). Every attempt counts, whether or not its
// outcome is applied afterwards: each was a real request to a receiver.
func (m *Metrics) AttemptDone(_ *store.ClaimedDelivery, res *sender.Result, _ *store.DeliveryOutcome) {
	c := res.Class
	if c < sender.Success || c > sender.ClientError {
		// The dispatcher retries an unknown class; count it so too.
		c = sender.Retryable
	}
	m.attempts[c].Inc()
	m.attemptDuration.Observe(res.Duration.Seconds())
}

// OutcomeWritten counts an outcome the store applied by what it did to the
// delivery, and for a delivered one observes the latency from the event's
// acceptance (c.Event.CreatedAt) to decidedAt, taken as 0 when the clocks
// of the database and this node disagree so far that it comes out negative
// (dispatch.Hooks.OutcomeWritten). An outcome not applied counts only as
// not applied: the delivery will be decided again by whoever holds it, and
// counting both would count one delivery twice.
func (m *Metrics) OutcomeWritten(c *store.ClaimedDelivery, out *store.DeliveryOutcome, decidedAt time.Time, applied bool) {
	if !applied {
		m.stale.Inc()
		return
	}
	switch out.Status {
	case herald.StatusDelivered:
		m.delivered.Inc()
		latency := decidedAt.Sub(c.Event.CreatedAt)
		if latency < 0 {
			latency = 0
		}
		m.deliveryLatency.Observe(latency.Seconds())
	case herald.StatusDead:
		m.DeliveryDead(out.DeadReason)
	case herald.StatusPending:
		m.retried.Inc()
	}
}

// DeliveryDead counts a delivery sent dead for reason: by a claim, which
// ended it instead of handing it out (dispatch.Hooks.DeadAtClaim:
// lease_lost), or by an outcome written (OutcomeWritten).
func (m *Metrics) DeliveryDead(reason herald.DeadReason) {
	m.dead.Inc()
	if r, ok := m.deadReasons[reason]; ok {
		r.Inc()
	} else {
		// A reason added to the dispatcher later: still a small fixed set.
		m.deadByReason.WithLabelValues(string(reason)).Inc()
	}
}

// Purged counts the rows one purge batch deleted, by table
// (maintenance.PurgerConfig.Purged).
func (m *Metrics) Purged(res store.PurgeResult) {
	m.purgedEvents.Add(float64(res.Events))
	m.purgedDeliveries.Add(float64(res.Deliveries))
	m.purgedAttempts.Add(float64(res.Attempts))
}

// RequestLimitFailedOpen counts a take from the request limits' shared
// buckets that failed (api.Config.RequestLimitFailedOpen).
func (m *Metrics) RequestLimitFailedOpen() { m.requestLimitFailedOpen.Inc() }

// NoticeCounted counts one notice's result (notice.Config.Counted).
func (m *Metrics) NoticeCounted(kind, result string) {
	m.notices.WithLabelValues(kind, result).Inc()
}

// slogPrinter lets promhttp report encoding errors through slog.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) {
	p.log.Warn("serve metrics", logkey.Error, fmt.Sprint(v...))
}
