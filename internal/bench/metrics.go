package bench

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// attemptsMetric is the counter of HTTP attempts on a Herald's /metrics.
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
// exposition, whatever its labels.
func sumCounter(body io.Reader, name string) (float64, bool) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var sum float64
	found := false
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue // a comment, another metric, or a longer name
		}
		if rest[0] == '{' {
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				continue
			}
			rest = rest[end+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		sum += v
		found = true
	}
	return sum, found && sc.Err() == nil
}
