package bench

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// attemptsMetric is metrics.NameAttempts, the counter of HTTP attempts on a
// Herald's /metrics, named here because the bench must not import the
// metrics package (it imports the sender, whose benchmarks use the bench's
// payloads); TestSumCounter checks that the two agree.
const attemptsMetric = "herald_attempts_total"

// scrapeAttempts reads the server's /metrics and sums herald_attempts_total
// over its labels. It says false when the server has no /metrics or no
// such counter; the report then counts deliveries instead.
func (r *run) scrapeAttempts(ctx context.Context) (float64, bool) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+"/metrics", nil)
	if err != nil {
		return 0, false
	}
	res, err := r.hc.Do(req)
	if err != nil {
		return 0, false
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return 0, false
	}
	return sumCounter(res.Body, attemptsMetric)
}

// attemptsSettle is how long settledAttempts waits for Herald's attempt
// counter to catch up with the deliveries the receiver has seen.
const attemptsSettle = 5 * time.Second

// settledAttempts scrapes the attempt counter until it has counted at
// least delivered attempts since base, or attemptsSettle has passed. Herald
// counts an attempt once it has read the receiver's response, a moment
// after the receiver has seen the delivery, so a scrape taken the instant
// the last delivery arrives can be one or more attempts short.
func (r *run) settledAttempts(ctx context.Context, base float64, delivered int64) (float64, bool) {
	deadline := time.Now().Add(attemptsSettle)
	for {
		v, ok := r.scrapeAttempts(ctx)
		if !ok || v-base >= float64(delivered) || !time.Now().Before(deadline) {
			return v, ok
		}
		select {
		case <-ctx.Done():
			return v, ok
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// sumCounter sums every sample of the counter name in a Prometheus text
// exposition, whatever its labels. It says false when the exposition does
// not parse or has no such counter.
func sumCounter(body io.Reader, name string) (float64, bool) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(body)
	if err != nil {
		return 0, false
	}
	mf, ok := mfs[name]
	if !ok || len(mf.GetMetric()) == 0 {
		return 0, false
	}
	var sum float64
	for _, m := range mf.GetMetric() {
		switch {
		case m.GetCounter() != nil:
			sum += m.GetCounter().GetValue()
		case m.GetUntyped() != nil:
			sum += m.GetUntyped().GetValue()
		}
	}
	return sum, true
}
