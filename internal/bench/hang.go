package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldhooks/herald/internal/client"
)

// Hanging endpoints: receivers that never answer. Beside the load, the
// bench can make endpoints whose receiver holds every request open until
// Herald gives up on it (the endpoint's timeout), and send them events at
// a rate of their own. Their deliveries are not in the tally: the report's
// latency and counts are the healthy endpoints' alone, so a run with
// hanging endpoints, set beside one without, shows what they cost the
// others (invariant 9: one slow or dead endpoint cannot delay the rest).

// hangEventType is what the hanging endpoints subscribe to; the load
// never sends it.
const hangEventType = "bench.hang"

// hangPath prefixes a hanging endpoint's URL on the receiver (/h/12).
const hangPath = "/h/"

// HangConsumer is the consumer of hanging endpoint i (counted from 1):
// hang_000001, hang_000002, ... Each is a consumer of its own, as the
// customers whose receivers hang are.
func HangConsumer(i int) string { return fmt.Sprintf("hang_%06d", i) }

// hangCount is what the receiver saw of the hanging endpoints: the
// requests that came, those open now and the most open at once.
type hangCount struct {
	arrived atomic.Int64
	open    atomic.Int64
	mu      sync.Mutex
	peak    int64
}

func (h *hangCount) begin() {
	h.arrived.Add(1)
	n := h.open.Add(1)
	h.mu.Lock()
	h.peak = max(h.peak, n)
	h.mu.Unlock()
}

func (h *hangCount) end() { h.open.Add(-1) }

func (h *hangCount) peakOpen() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.peak
}

// hang holds a request to a hanging endpoint until its client goes away
// (Herald's timeout, or the receiver closing), or MaxReceiverDelay has
// passed, when it answers 503 so that nothing is held for ever.
func (r *receiver) hang(w http.ResponseWriter, req *http.Request) {
	r.hung.begin()
	defer r.hung.end()
	// Read the body to its end: net/http notices the client gone only
	// once nothing of it is left to read.
	_, _ = io.Copy(io.Discard, req.Body)
	t := time.NewTimer(MaxReceiverDelay)
	defer t.Stop()
	select {
	case <-req.Context().Done():
	case <-t.C:
		w.WriteHeader(http.StatusServiceUnavailable)
	}
}

// createHanging makes o.HangingEndpoints endpoints whose receiver hangs,
// each of its own consumer, subscribed to hangEventType, with the
// timeout o.HangingTimeout (Herald's default when 0).
func (r *run) createHanging(ctx context.Context) error {
	o := r.o
	n := o.HangingEndpoints
	if n == 0 {
		return nil
	}
	desc := "herald bench: hanging"
	var (
		next      atomic.Int64
		wg        sync.WaitGroup
		errOnce   sync.Once
		createErr error
		mu        sync.Mutex
	)
	for range min(IdleWorkers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1))
				if i > n || ctx.Err() != nil {
					return
				}
				c, url := HangConsumer(i), r.recv.hangURL(i)
				p := &client.EndpointParams{
					ConsumerID: &c, URL: &url, Description: &desc, EventTypes: []string{hangEventType},
				}
				if o.HangingTimeout > 0 {
					t := client.Duration(o.HangingTimeout)
					p.Timeout = &t
				}
				ep, err := r.api.EndpointCreate(ctx, p)
				if err != nil {
					errOnce.Do(func() { createErr = explainSetup(err) })
					next.Store(int64(n)) // stop the others
					return
				}
				mu.Lock()
				r.hangCreated = append(r.hangCreated, ep.ID)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if createErr != nil {
		return fmt.Errorf("hanging endpoints: %w", createErr)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("create hanging endpoints: %w", err)
	}
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "bench: created %d hanging endpoints\n", n)
	}
	return nil
}

// hangRate is the events a second sent to the hanging endpoints: the
// --hanging-rate, or by default one an endpoint every ten seconds.
func (o Options) hangRate() float64 {
	if o.HangingRate > 0 {
		return o.HangingRate
	}
	return float64(o.HangingEndpoints) / 10
}

// sendHanging sends single events to the hanging endpoints in turn at
// hangRate until ctx ends, counting them apart from the load's. It runs
// beside the load's senders, on the same HTTP client.
func (r *run) sendHanging(ctx context.Context, start time.Time) {
	o := r.o
	n := o.HangingEndpoints
	bodies := make([][]byte, n)
	for i := range n {
		bodies[i] = fmt.Appendf(nil, `{"consumer_id":%q,"event_type":%q,"payload":{"n":%d}}`, HangConsumer(i+1), hangEventType, i+1)
	}
	every := time.Duration(float64(time.Second) / o.hangRate())
	timer := time.NewTimer(0)
	defer timer.Stop()
	for k := int64(0); ; k++ {
		due := start.Add(time.Duration(k) * every)
		timer.Reset(time.Until(due))
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		r.hangSent.Add(1)
		if err := r.postEvent(ctx, bodies[k%int64(n)]); err != nil {
			if ctx.Err() == nil {
				r.hangFailed.Add(1)
			}
			continue
		}
		r.hangAccepted.Add(1)
	}
}

// postEvent sends one event to POST /v1/events and wants a 202.
func (r *run) postEvent(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+"/v1/events", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+r.apiKey)
	res, err := r.hc.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusAccepted {
		return fmt.Errorf("HTTP %d", res.StatusCode)
	}
	return nil
}

// hangingReport is what the run's hanging endpoints did; nil without them.
func (r *run) hangingReport() *HangingReport {
	o := r.o
	if o.HangingEndpoints == 0 {
		return nil
	}
	return &HangingReport{
		Endpoints: o.HangingEndpoints, Rate: o.hangRate(),
		TimeoutSeconds: o.HangingTimeout.Seconds(),
		Sent:           r.hangSent.Load(), Accepted: r.hangAccepted.Load(), Failed: r.hangFailed.Load(),
		Arrived: r.recv.hung.arrived.Load(), PeakOpen: r.recv.hung.peakOpen(),
	}
}

// HangingReport is what the hanging endpoints (--hanging-endpoints) were
// sent and held: the report's other figures leave them out.
type HangingReport struct {
	Endpoints int     `json:"endpoints"`
	Rate      float64 `json:"rate"`
	// TimeoutSeconds is their endpoint timeout; 0 is Herald's default.
	TimeoutSeconds float64 `json:"timeout_seconds"`
	// Sent, Accepted and Failed count the events sent to them.
	Sent     int64 `json:"sent"`
	Accepted int64 `json:"accepted"`
	Failed   int64 `json:"failed"`
	// Arrived is the attempts their receiver held until Herald gave up;
	// PeakOpen the most it held at once.
	Arrived  int64 `json:"arrived"`
	PeakOpen int64 `json:"peak_open"`
}

// hangURL is where hanging endpoint i delivers.
func (r *receiver) hangURL(i int) string {
	return "http://" + r.ln.Addr().String() + hangPath + strconv.Itoa(i)
}
