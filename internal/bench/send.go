package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// send runs the senders until the events are sent, the duration is over,
// too many calls failed, or ctx ends.
func (r *run) send(ctx context.Context, start time.Time) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range r.o.Connections {
		wg.Go(func() { r.sender(ctx, start, &next) })
	}
	wg.Wait()
	if n := r.failedCalls.Load(); n >= maxFailedCalls {
		return fmt.Errorf("stopped sending after %d failed ingest calls; the first: %s", n, r.firstErrText)
	}
	return nil
}

// sender makes ingest calls one after another, taking the next batch of
// events from next. With a rate, batch k waits for its time on the
// schedule (start + its first event / rate); a sender that falls behind
// sends at once.
func (r *run) sender(ctx context.Context, start time.Time, next *atomic.Int64) {
	o := r.o
	batch := int64(o.Batch)
	deadline := start.Add(o.Duration)
	var timer *time.Timer
	for ctx.Err() == nil && r.failedCalls.Load() < maxFailedCalls {
		first := (next.Add(1) - 1) * batch
		if first >= r.limit {
			return
		}
		n := min(batch, r.limit-first)
		if o.Rate > 0 {
			due := start.Add(time.Duration(float64(first) / o.Rate * float64(time.Second)))
			if o.Duration > 0 && !due.Before(deadline) {
				return
			}
			if wait := time.Until(due); wait > 0 {
				if timer == nil {
					timer = time.NewTimer(wait)
				} else {
					timer.Reset(wait)
				}
				select {
				case <-ctx.Done():
					timer.Stop()
					return
				case <-timer.C:
				}
			}
		} else if o.Duration > 0 && !time.Now().Before(deadline) {
			return
		}
		r.call(ctx, first, n)
	}
}

// ingestAnswer is the part of an ingest answer the bench reads.
type ingestAnswer struct {
	ID         string `json:"id"`
	Deliveries []struct {
		EndpointID string `json:"endpoint_id"`
	} `json:"deliveries"`
}

// call sends events first to first+n-1 in one ingest call and records
// what Herald accepted. Event i goes to endpoint group i mod groups.
func (r *run) call(ctx context.Context, first, n int64) {
	groups := int64(len(r.bodies))
	var body []byte
	path := "/v1/events"
	if r.o.Batch == 1 {
		body = r.bodies[first%groups] // shared and never written: safe to send from many calls
	} else {
		path = "/v1/events/batch"
		size := 16
		for i := first; i < first+n; i++ {
			size += len(r.bodies[i%groups]) + 1
		}
		body = make([]byte, 0, size)
		body = append(body, `{"events":[`...)
		for i := first; i < first+n; i++ {
			if i > first {
				body = append(body, ',')
			}
			body = append(body, r.bodies[i%groups]...)
		}
		body = append(body, "]}"...)
	}
	r.sent.Add(n)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+path, bytes.NewReader(body))
	if err != nil {
		r.fail(n, err)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+r.apiKey)
	began := time.Now()
	res, err := r.hc.Do(req)
	at := time.Now()
	if err != nil {
		if ctx.Err() == nil { // a call cut short by an interrupt is not Herald's failure
			r.fail(n, err)
		}
		return
	}
	raw, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		r.fail(n, fmt.Errorf("read the answer: %w", err))
		return
	}
	if res.StatusCode != http.StatusAccepted {
		r.fail(n, fmt.Errorf("HTTP %d: %s", res.StatusCode, truncate(strings.TrimSpace(string(raw)), maxErrorText)))
		return
	}
	r.calls.add(at.Sub(began))
	if r.o.Batch == 1 {
		var a ingestAnswer
		if err := json.Unmarshal(raw, &a); err != nil {
			r.fail(n, fmt.Errorf("decode the answer: %w", err))
			return
		}
		r.accepted(&a, at)
		return
	}
	var b struct {
		Data []ingestAnswer `json:"data"`
	}
	if err := json.Unmarshal(raw, &b); err != nil || int64(len(b.Data)) != n {
		r.fail(n, fmt.Errorf("decode the answer: %d results for %d events (%v)", len(b.Data), n, err))
		return
	}
	for i := range b.Data {
		r.accepted(&b.Data[i], at)
	}
}

// accepted records one accepted event's deliveries in the tally.
func (r *run) accepted(a *ingestAnswer, at time.Time) {
	r.acceptedN.Add(1)
	mismatch := len(a.Deliveries) != r.o.Fanout
	for _, d := range a.Deliveries {
		num, ok := r.epNum[d.EndpointID]
		if !ok {
			mismatch = true
			continue
		}
		r.tally.Accepted(a.ID+"#"+num, at)
	}
	if mismatch {
		r.mismatches.Add(1)
	}
}

func (r *run) fail(n int64, err error) {
	r.failedN.Add(n)
	r.failedCalls.Add(1)
	r.firstErr.Do(func() { r.firstErrText = err.Error() })
}

// callTimes collects the round trips of ingest calls, from many senders.
// Its zero value is ready for use.
type callTimes struct {
	mu sync.Mutex
	d  []time.Duration
}

func (c *callTimes) add(d time.Duration) {
	c.mu.Lock()
	c.d = append(c.d, d)
	c.mu.Unlock()
}

// summary is the calls' round trips in milliseconds.
func (c *callTimes) summary() LatencyMS {
	c.mu.Lock()
	defer c.mu.Unlock()
	slices.Sort(c.d)
	if len(c.d) == 0 {
		return LatencyMS{}
	}
	return LatencyMS{
		Samples: len(c.d),
		P50:     millis(Percentile(c.d, 0.50)), P90: millis(Percentile(c.d, 0.90)),
		P99: millis(Percentile(c.d, 0.99)), Max: millis(c.d[len(c.d)-1]),
	}
}
