package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldhooks/herald/internal/client"
)

// idleEventType is what the idle endpoints subscribe to: the load sends
// bench.g<N> only, and to other consumers, so an idle endpoint never has a
// delivery. One that arrived anyway would count as unexpected.
const idleEventType = "bench.idle"

// idleReceiverNum is the endpoint "number" in the idle endpoints' URL
// (/e/idle): no accepted answer names it, so a delivery there is counted
// as unexpected.
const idleReceiverNum = "idle"

// IdleConsumer is the consumer of idle endpoint i (counted from 1):
// idle_000001, idle_000002, ...
func IdleConsumer(i int) string { return fmt.Sprintf("idle_%06d", i) }

// createIdle creates o.IdleEndpoints idle endpoints over IdleWorkers
// concurrent calls (the API has no batch call for endpoints), printing a
// line every ProgressEvery, and says how long it took.
func (r *run) createIdle(ctx context.Context) (*IdleEndpoints, error) {
	o := r.o
	n := o.IdleEndpoints
	if n == 0 {
		return nil, nil
	}
	url, desc := r.recv.urlFor(idleReceiverNum), "herald bench: idle"
	start := time.Now()
	var (
		next, done atomic.Int64
		wg         sync.WaitGroup
		errOnce    sync.Once
		createErr  error
		mu         sync.Mutex
	)
	ids := make([]string, 0, n)
	stop := r.every(func(time.Time) {
		fmt.Fprintf(r.o.Progress, "bench: created %d/%d idle endpoints\n", done.Load(), n)
	})
	for range min(IdleWorkers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1))
				if i > n || ctx.Err() != nil {
					return
				}
				c := IdleConsumer(i)
				ep, err := r.api.EndpointCreate(ctx, &client.EndpointParams{
					ConsumerID: &c, URL: &url, Description: &desc, EventTypes: []string{idleEventType},
				})
				if err != nil {
					errOnce.Do(func() { createErr = explainSetup(err) })
					next.Store(int64(n)) // stop the others
					return
				}
				mu.Lock()
				ids = append(ids, ep.ID)
				mu.Unlock()
				done.Add(1)
			}
		})
	}
	wg.Wait()
	stop()
	r.idleCreated = ids
	if createErr != nil {
		return nil, fmt.Errorf("idle endpoints: %w", createErr)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("create idle endpoints: %w", err)
	}
	secs := time.Since(start).Seconds()
	if r.o.Progress != nil {
		fmt.Fprintf(r.o.Progress, "bench: created %d idle endpoints in %.1f s\n", n, secs)
	}
	res := &IdleEndpoints{Count: n, CreateSeconds: secs, Connections: min(IdleWorkers, n)}
	if secs > 0 {
		res.PerSecond = float64(n) / secs
	}
	return res, nil
}

// every calls f every ProgressEvery on a goroutine of its own, when there
// is a Progress writer, until the returned function is called.
func (r *run) every(f func(time.Time)) (stop func()) {
	if r.o.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(r.o.ProgressEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case t := <-tick.C:
				f(t)
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// measureIdle holds the node without load for o.Idle and measures what it
// cost: the spawned Herald's CPU time and, when the bench can reach its
// PostgreSQL, the CPU time of that database's backends and the
// transactions it committed.
func (r *run) measureIdle(ctx context.Context) (*IdleReport, error) {
	o := r.o
	if r.o.Progress != nil {
		fmt.Fprintf(r.o.Progress, "bench: idle for %s, measuring CPU\n", o.Idle)
	}
	var pg0 pgUsage
	var pgErr error
	if r.probe != nil && r.probe.pg != nil {
		pg0, pgErr = r.probe.pgUsage(ctx)
	}
	cpu0, cpuErr := r.childCPU()
	start := time.Now()
	wait := time.NewTimer(o.Idle)
	select {
	case <-ctx.Done():
		wait.Stop()
		return nil, fmt.Errorf("bench interrupted while idle: %w", ctx.Err())
	case <-wait.C:
	}
	cpu1, cpuErr1 := r.childCPU()
	wall := time.Since(start).Seconds()
	rep := &IdleReport{Seconds: wall}
	if cpuErr == nil && cpuErr1 == nil {
		s := (cpu1 - cpu0).Seconds()
		rep.HeraldCPUSeconds, rep.HeraldCorePercent = ptr(s), ptr(100*s/wall)
	}
	if r.probe != nil && r.probe.pg != nil && pgErr == nil {
		pg1, err := r.probe.pgUsage(ctx)
		if err == nil {
			s := pg1.cpuSince(pg0).Seconds()
			rep.PostgresCPUSeconds, rep.PostgresCorePercent = ptr(s), ptr(100*s/wall)
			rep.PostgresBackends = ptr(len(pg1.cpu))
			rep.PostgresTransactions = ptr(pg1.xacts - pg0.xacts)
		}
		pgErr = err
	}
	if pgErr != nil {
		rep.PostgresError = pgErr.Error()
	}
	return rep, nil
}
