package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
)

const (
	// chaosConsumer owns every endpoint and event of a run.
	chaosConsumer = "chaos"
	// chaosEventType is the type of every event the load sends.
	chaosEventType = "chaos.tick"
	// batchSize is the size of a batched call; batchShare of the calls are
	// batches.
	batchSize  = 5
	batchShare = 0.25
	// loadInFlight bounds the ingest calls in flight; a unit waits for room.
	loadInFlight = 32
	// ingestTimeout bounds one ingest call. A frozen serve node answers
	// nothing; the call is then tried again.
	ingestTimeout = 3 * time.Second
	// ingestTries bounds how often one call is tried: the same events with
	// the same idempotency keys, so a call that was committed but whose
	// answer was lost is acknowledged by the next try as a duplicate.
	ingestTries = 5
	// padBytes pads each payload, so the body is not trivially small.
	padBytes = 200
)

// sentEvent is what the load knows of one event it sent.
type sentEvent struct {
	CID   string
	Seq   int64
	Batch bool
	// SentAt is when the first try of its call started; AckAt when Herald
	// acknowledged it (zero if it never did).
	SentAt time.Time
	AckAt  time.Time
	// EventID is Herald's id for it, from the acknowledgement.
	EventID string
	// Deliveries is how many deliveries the acknowledgement listed.
	Deliveries int
	// Tries is how many calls it took; Duplicate, that the acknowledging
	// call found it already stored (an earlier try was committed).
	Tries     int
	Duplicate bool
	// Rejected holds a 4xx answer: the harness sends only valid events, so
	// any is a finding.
	Rejected string
}

// loader sends events at a steady rate to the serve node's API, single and
// batched, and records each event's acknowledgement.
type loader struct {
	api    string // http://host:port
	apiKey string
	rate   float64 // events per second
	run    string  // prefix of every cid, unique to the run
	rnd    *rand.Rand
	hc     *http.Client

	mu     sync.Mutex
	events []*sentEvent
	seq    int64
}

func newLoader(api, apiKey, run string, rate float64, seed uint64) *loader {
	return &loader{
		api: api, apiKey: apiKey, rate: rate, run: run,
		rnd: rand.New(rand.NewPCG(seed, 0x10ad)),
		hc:  &http.Client{Timeout: ingestTimeout},
	}
}

// run sends until ctx ends, then waits for the calls in flight.
func (l *loader) loop(ctx context.Context) {
	sem := make(chan struct{}, loadInFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	start := time.Now()
	var due float64 // events owed by now
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		due = time.Since(start).Seconds()*l.rate - float64(l.count())
		for due >= 1 {
			size := 1
			if l.rnd.Float64() < batchShare {
				size = batchSize
			}
			evs := l.next(size)
			due -= float64(size)
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				l.send(evs)
			}()
		}
	}
}

func (l *loader) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.events)
}

// next makes size new events, recorded before they are sent.
func (l *loader) next(size int) []*sentEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	evs := make([]*sentEvent, size)
	for i := range evs {
		l.seq++
		evs[i] = &sentEvent{CID: fmt.Sprintf("%s-%d", l.run, l.seq), Seq: l.seq, Batch: size > 1}
		l.events = append(l.events, evs[i])
	}
	return evs
}

type ingestItem struct {
	ConsumerID     string          `json:"consumer_id"`
	EventType      string          `json:"event_type"`
	Payload        json.RawMessage `json:"payload"`
	IdempotencyKey string          `json:"idempotency_key"`
}

type ingestAnswer struct {
	ID         string `json:"id"`
	Duplicate  bool   `json:"duplicate"`
	Deliveries []struct {
		ID         string `json:"id"`
		EndpointID string `json:"endpoint_id"`
	} `json:"deliveries"`
}

// send makes one call for evs (a single event, or a batch) and tries it
// again on a network error or a 5xx, for at most ingestTries calls.
func (l *loader) send(evs []*sentEvent) {
	items := make([]ingestItem, len(evs))
	for i, ev := range evs {
		payload := fmt.Sprintf(`{"cid":%q,"seq":%d,"pad":%q}`, ev.CID, ev.Seq, strings.Repeat("x", padBytes))
		items[i] = ingestItem{ConsumerID: chaosConsumer, EventType: chaosEventType, Payload: json.RawMessage(payload), IdempotencyKey: ev.CID}
	}
	path, body := "/v1/events", any(items[0])
	if len(evs) > 1 {
		path, body = "/v1/events/batch", map[string]any{"events": items}
	}
	raw, _ := json.Marshal(body)
	first := time.Now()
	l.mu.Lock()
	for _, ev := range evs {
		ev.SentAt = first
	}
	l.mu.Unlock()

	backoff := 200 * time.Millisecond
	for try := 1; try <= ingestTries; try++ {
		status, answer, err := l.post(path, raw)
		switch {
		case err == nil && (status == http.StatusAccepted || status == http.StatusOK):
			l.acked(evs, try, answer, len(evs) > 1)
			return
		case err == nil && status >= 400 && status < 500 && status != http.StatusTooManyRequests && status != http.StatusRequestTimeout:
			l.mu.Lock()
			for _, ev := range evs {
				ev.Tries = try
				ev.Rejected = fmt.Sprintf("HTTP %d: %s", status, truncate(string(answer), 200))
			}
			l.mu.Unlock()
			return
		}
		time.Sleep(backoff)
		backoff *= 2
	}
	l.mu.Lock()
	for _, ev := range evs {
		ev.Tries = ingestTries
	}
	l.mu.Unlock()
}

func (l *loader) post(path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, l.api+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+l.apiKey)
	req.Header.Set("Content-Type", "application/json")
	res, err := l.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(res.Body, 4<<20))
	return res.StatusCode, answer, err
}

// acked records the acknowledgement of evs.
func (l *loader) acked(evs []*sentEvent, try int, answer []byte, batch bool) {
	now := time.Now()
	var results []ingestAnswer
	if batch {
		var out struct {
			Data []ingestAnswer `json:"data"`
		}
		_ = json.Unmarshal(answer, &out)
		results = out.Data
	} else {
		var one ingestAnswer
		_ = json.Unmarshal(answer, &one)
		results = []ingestAnswer{one}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, ev := range evs {
		ev.AckAt, ev.Tries = now, try
		if i < len(results) {
			ev.EventID = results[i].ID
			ev.Deliveries = len(results[i].Deliveries)
			ev.Duplicate = results[i].Duplicate
		}
	}
}

// snapshot copies what was sent, once the load has stopped.
func (l *loader) snapshot() []sentEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]sentEvent, len(l.events))
	for i, ev := range l.events {
		out[i] = *ev
	}
	return out
}

// truncate cuts s to n bytes and marks the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
