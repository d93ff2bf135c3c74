// Depth sampling: a Sampler samples the queue's depth into the database
// once a minute (store.DepthStore), so the dashboard charts due now, the oldest
// due wait and the dead-letter depth over the last hour and day, the same
// on every node.
//
// Every serve and worker node runs a Sampler. A minute is sampled once
// whatever the number of nodes: the store looks for the minute's sample
// first and measures nothing when it is there, and of nodes that sample
// the same minute at once the first write wins. Each node samples at the
// second of the minute it started at, so nodes started at different times
// take turns being first rather than all measuring at the top of the
// minute. The sample costs what GET /v1/stats?counts=false costs (the due
// queue and the dead letters), never the history kept.

package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/logkey"
	"github.com/heraldhooks/herald/internal/store"
)

// SamplerConfig sets up a Sampler.
type SamplerConfig struct {
	Store store.DepthStore
	// Clock times the samples and gives the store its Now (StoreNow).
	// Default clock.Real.
	Clock  clock.Clock
	Logger *slog.Logger
}

// Sampler samples the queue's depth once a minute until stopped.
type Sampler struct {
	cfg SamplerConfig
}

// NewSampler returns a sampler; zero fields of cfg take their defaults.
func NewSampler(cfg SamplerConfig) *Sampler {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Sampler{cfg: cfg}
}

// Run samples at once, and then once a minute, at the second of the
// minute it started at, until ctx ends; it returns nil then. A sample
// that fails is logged and given up: its minute stays without one (a gap
// in the charts, not a zero) unless another node samples it.
func (s *Sampler) Run(ctx context.Context) error {
	start := s.cfg.Clock.Now()
	phase := start.Sub(start.Truncate(time.Minute))
	for {
		if _, err := s.Sample(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("sample queue depth", logkey.Error, err)
		}
		now := s.cfg.Clock.Now()
		t := s.cfg.Clock.NewTimer(NextSample(now, phase).Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
	}
}

// Sample samples the minute under way, unless it has a sample already,
// and says whether it wrote one.
func (s *Sampler) Sample(ctx context.Context) (bool, error) {
	return s.cfg.Store.DepthSample(ctx, &store.DepthSampleParams{Now: s.cfg.Clock.StoreNow()})
}

// NextSample is the first time after now that lies phase into its minute: the
// times are fixed to the minute, so a late timer does not push the ones
// after it later.
func NextSample(now time.Time, phase time.Duration) time.Time {
	next := now.Truncate(time.Minute).Add(phase)
	if !next.After(now) {
		next = next.Add(time.Minute)
	}
	return next
}
