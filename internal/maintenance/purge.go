// Purges: the history Herald keeps is bounded (--retention): a Purger
// deletes the events whose deliveries all ended longer ago than the
// retention, with their deliveries and attempts, through the store's
// EventPurge. Each node runs one; on PostgreSQL one purges at a time (the
// store's advisory lock), the others find it Busy and wait for their next
// pass.
//
// A pass walks every event made before the cutoff, oldest first, in small
// batches (one short transaction each) with a pause between two, so the
// purge never holds the database long enough to show in ingest or claim
// latency: it runs beside them, not ahead of them.
//
// Each pass first deletes the activity series' minutes and the depth
// series' samples older than a day and an hour (store.ActivityPurge,
// store.DepthPurge), a batch at a time with the same pauses, so the
// charts' tables stay small; this runs with a retention of 0 (keep
// everything) too, which keeps every event but no old minute. It deletes
// the request limits' shared buckets that have refilled as well
// (store.RequestBucketPurge): a missing bucket is a full one, so what
// stays is a row per key or portal session used in the last seconds.

package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/logkey"
	"github.com/heraldhooks/herald/internal/store"
)

// Defaults of PurgerConfig.
const (
	// DefaultPurgeInterval is how long a purger waits between passes: history
	// that ends now is kept for the retention anyway, so a minute late
	// costs nothing, and an idle pass is one index probe.
	DefaultPurgeInterval = time.Minute
	// DefaultPurgePause is the least time between two batches of a pass.
	DefaultPurgePause = 100 * time.Millisecond
)

// PurgeStore is what a Purger needs of the storage seam: the four
// purges, each a batch at a time.
type PurgeStore interface {
	EventPurge(ctx context.Context, p *store.EventPurgeParams) (store.PurgeResult, error)
	ActivityPurge(ctx context.Context, p *store.ActivityPurgeParams) (int, error)
	DepthPurge(ctx context.Context, p *store.DepthPurgeParams) (int, error)
	RequestBucketPurge(ctx context.Context, p *store.RequestBucketPurgeParams) (int, error)
}

// PurgerConfig sets up a Purger.
type PurgerConfig struct {
	Store PurgeStore
	// Clock times the passes, and gives the store its Now (StoreNow).
	// Default clock.Real.
	Clock  clock.Clock
	Logger *slog.Logger
	// Retention is how long ended history is kept; 0 keeps every event
	// (a pass then purges the activity series only).
	Retention time.Duration
	// ActivityKeep is how long the activity series' minutes are kept;
	// default (and at least) store.MinActivityKeep.
	ActivityKeep time.Duration
	// Limit is how many events a batch looks at (store.PurgeLimit).
	Limit int
	// Interval is the time between two passes, on Clock.
	Interval time.Duration
	// Pause is the least real time between two batches of a pass; a batch
	// that took longer is followed by a pause as long as it took, so the
	// purge holds the database at most half the time however slow it is.
	// Real time, not Clock: the pause spares the database, which real
	// time governs, also under a test clock.
	Pause time.Duration
	// Purged, when set, is told of every batch that deleted rows (the
	// metrics count them).
	Purged func(store.PurgeResult)
}

// Purger runs purge passes until stopped.
type Purger struct {
	cfg PurgerConfig
}

// NewPurger returns a purger; zero fields of cfg take their defaults.
func NewPurger(cfg PurgerConfig) *Purger {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultPurgeInterval
	}
	if cfg.Pause <= 0 {
		cfg.Pause = DefaultPurgePause
	}
	cfg.Limit = store.PurgeLimit(cfg.Limit)
	cfg.ActivityKeep = max(cfg.ActivityKeep, store.MinActivityKeep)
	return &Purger{cfg: cfg}
}

// Run runs a pass at once and then one every Interval, until ctx ends; it
// returns nil then. A pass that fails is logged and given up: the next
// one starts from the oldest event again, so nothing is skipped for good.
func (p *Purger) Run(ctx context.Context) error {
	for {
		if _, err := p.Pass(ctx); err != nil && ctx.Err() == nil {
			p.cfg.Logger.Warn("purge old history", logkey.Error, err)
		}
		t := p.cfg.Clock.NewTimer(p.cfg.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
	}
}

// Pass walks every event made before the cutoff once, in batches, and
// returns what it deleted in all. It ends early when another node holds
// the purge (Busy), or when ctx ends. A pass that deleted something says
// so in the log.
func (p *Purger) Pass(ctx context.Context) (store.PurgeResult, error) {
	if err := p.purgeActivity(ctx); err != nil && ctx.Err() == nil {
		p.cfg.Logger.Warn("purge old activity", logkey.Error, err)
	}
	if p.cfg.Retention <= 0 {
		return store.PurgeResult{Done: true}, nil
	}
	var (
		total   store.PurgeResult
		after   store.PurgeCursor
		batches int
		began   = time.Now()
	)
	defer func() {
		if total.Rows() == 0 {
			return
		}
		p.cfg.Logger.Info("purged history past retention",
			logkey.Events, total.Events, logkey.Deliveries, total.Deliveries, logkey.Attempts, total.Attempts,
			logkey.Batches, batches, logkey.Retention, p.cfg.Retention.String(),
			logkey.DurationMS, time.Since(began).Milliseconds())
	}()
	for {
		start := time.Now()
		res, err := p.cfg.Store.EventPurge(ctx, &store.EventPurgeParams{
			Retention: p.cfg.Retention,
			After:     after,
			Limit:     p.cfg.Limit,
			Now:       p.cfg.Clock.StoreNow(),
		})
		if err != nil {
			return total, err
		}
		batches++
		took := time.Since(start)
		total.Events += res.Events
		total.Deliveries += res.Deliveries
		total.Attempts += res.Attempts
		if res.Rows() > 0 && p.cfg.Purged != nil {
			p.cfg.Purged(res)
		}
		if res.Busy {
			total.Busy = true
			return total, nil
		}
		if res.Done {
			total.Done = true
			return total, nil
		}
		after = res.Next
		if err := pause(ctx, max(p.cfg.Pause, took)); err != nil {
			return total, err
		}
	}
}

// purgeActivity deletes the activity series' minutes and the depth
// series' samples older than ActivityKeep, and the request buckets that
// have refilled, a batch at a time, pausing between batches as Pass does.
func (p *Purger) purgeActivity(ctx context.Context) error {
	for _, purge := range []func(context.Context, *store.ActivityPurgeParams) (int, error){
		p.cfg.Store.ActivityPurge,
		func(ctx context.Context, a *store.ActivityPurgeParams) (int, error) {
			return p.cfg.Store.DepthPurge(ctx, (*store.DepthPurgeParams)(a))
		},
		func(ctx context.Context, a *store.ActivityPurgeParams) (int, error) {
			return p.cfg.Store.RequestBucketPurge(ctx, &store.RequestBucketPurgeParams{Limit: a.Limit, Now: a.Now})
		},
	} {
		for {
			start := time.Now()
			n, err := purge(ctx, &store.ActivityPurgeParams{
				Keep:  p.cfg.ActivityKeep,
				Limit: store.DefaultActivityPurgeLimit,
				Now:   p.cfg.Clock.StoreNow(),
			})
			if err != nil {
				return err
			}
			if n < store.DefaultActivityPurgeLimit {
				break
			}
			if err := pause(ctx, max(p.cfg.Pause, time.Since(start))); err != nil {
				return err
			}
		}
	}
	return nil
}

// pause waits d of real time, or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
