package metrics

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/logkey"
	"github.com/heraldhooks/herald/internal/store"
)

// statuses are the values of the status label of
// herald_deliveries_by_status, in the order they are exposed: the live
// deliveries and the dead ones, which the store counts from indexes of
// their own. Delivered and cancelled deliveries are history, and
// counting them costs every delivery kept (150 ms at 300,000 on
// PostgreSQL, so seconds at millions, past the read's timeout): GET
// /v1/stats counts them, and their rates are herald_deliveries_total's.
var statuses = [...]herald.Status{
	herald.StatusPending, herald.StatusDelivering, herald.StatusDead,
}

// Store is what Metrics reads of the storage seam (a store.Store has
// it): the queue's figures, for the queue gauges.
type Store interface {
	Stats(ctx context.Context, p *store.StatsParams) (*store.Stats, error)
}

// queueCollector reads the queue gauges from store.Stats when scraped. The
// queue is shared by every node, so these gauges say the same on each.
//
// One read serves every scrape for cacheFor, and concurrent scrapes wait
// for the one read in progress rather than start their own, so any number
// of scrapers cost the database at most one Stats query per cacheFor. A
// failed read is cached too: a database in trouble is not asked again by
// every scrape. While reads fail, the gauges are left out of the scrape
// (absent, not stale) and herald_queue_stats_errors_total counts the
// failures; the rest of the scrape is unaffected.
type queueCollector struct {
	store    Store
	clock    clock.Clock
	log      *slog.Logger
	timeout  time.Duration
	cacheFor time.Duration
	errors   prometheus.Counter
	// now measures the age of the cached read. It is the process's own
	// monotonic time, not clock: the cache is about load on the database,
	// which real time governs even in tests. Tests in this package replace it.
	now func() time.Time

	due, oldestDue, deadLetter, byStatus *prometheus.Desc

	mu     sync.Mutex
	readAt time.Time // zero: never read
	stats  *store.Stats
	err    error
}

func newQueueCollector(st Store, opts Options, errors prometheus.Counter) *queueCollector {
	return &queueCollector{
		store:    st,
		clock:    opts.Clock,
		log:      opts.Logger,
		timeout:  opts.StatsTimeout,
		cacheFor: opts.StatsCacheFor,
		errors:   errors,
		now:      time.Now,
		due: prometheus.NewDesc(NameQueueDue,
			"Pending deliveries whose time has come and that no dispatcher has claimed yet.", nil, nil),
		oldestDue: prometheus.NewDesc(NameQueueOldestDue,
			"How long the oldest due delivery has waited past its due time (0 when none is due).", nil, nil),
		deadLetter: prometheus.NewDesc(NameDeadLetterDepth,
			"Deliveries in the dead-letter queue (status dead), waiting for a replay.", nil, nil),
		byStatus: prometheus.NewDesc(NameDeliveriesStatus,
			"Live and dead deliveries by status: pending, delivering, dead.", []string{"status"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (q *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- q.due
	ch <- q.oldestDue
	ch <- q.deadLetter
	ch <- q.byStatus
}

// Collect implements prometheus.Collector.
func (q *queueCollector) Collect(ch chan<- prometheus.Metric) {
	st, err := q.read()
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(q.due, prometheus.GaugeValue, float64(st.DueNow))
	ch <- prometheus.MustNewConstMetric(q.oldestDue, prometheus.GaugeValue, st.OldestDueAge.Seconds())
	ch <- prometheus.MustNewConstMetric(q.deadLetter, prometheus.GaugeValue, float64(st.DeadLetters))
	byStatus := map[herald.Status]int64{
		herald.StatusPending: st.Pending, herald.StatusDelivering: st.Delivering, herald.StatusDead: st.DeadLetters,
	}
	for _, s := range statuses {
		ch <- prometheus.MustNewConstMetric(q.byStatus, prometheus.GaugeValue, float64(byStatus[s]), string(s))
	}
}

// read returns the cached stats while they are fresh, and reads them
// otherwise. The lock is held across the read so that concurrent scrapes
// share it.
func (q *queueCollector) read() (*store.Stats, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	if !q.readAt.IsZero() && now.Sub(q.readAt) < q.cacheFor {
		return q.stats, q.err
	}
	ctx, cancel := context.WithTimeout(context.Background(), q.timeout)
	defer cancel()
	st, err := q.store.Stats(ctx, &store.StatsParams{QueueOnly: true, Now: q.clock.StoreNow()})
	if err == nil && st == nil {
		err = errNoStats
	}
	if err != nil {
		q.errors.Inc()
		q.log.Warn("read queue stats for metrics", logkey.Error, err)
		st = nil
	}
	// Measured after the read, so a slow read is not stale on arrival.
	q.readAt, q.stats, q.err = q.now(), st, err
	return st, err
}
