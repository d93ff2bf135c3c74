package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store"

	"github.com/heraldhooks/herald/internal/metrics"
)

func TestOptionsValidate(t *testing.T) {
	t.Parallel()
	t.Run("DefaultsAreValid", func(t *testing.T) {
		t.Parallel()
		require.NoError(t, Options{}.Validate())
		o := Options{}.withDefaults()
		require.Equal(t, DefaultEvents, o.Events)
		require.Equal(t, DefaultEndpoints, o.Endpoints)
		require.Equal(t, DefaultEndpoints, o.Consumers, "one consumer per endpoint")
	})
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"TooManyEvents", Options{Events: MaxEvents + 1}, "--events must be from 1 to 10000000"},
		{"TooManyDeliveries", Options{Events: MaxEvents/2 + 1, Endpoints: 4, Fanout: 2}, "--events × --fanout"},
		{"TooLong", Options{Duration: MaxDuration + time.Second}, "--duration must be at most 1h0m0s"},
		{"RateTimesDurationTooMany", Options{Duration: time.Hour, Rate: 5000}, "--rate × --duration"},
		{"EventsAndDuration", Options{Events: 10, Duration: time.Second}, "not both"},
		{"NegativeRate", Options{Rate: -1}, "--rate"},
		{"RemoteServer", Options{Server: "http://10.0.0.7:8080", APIKey: "k"}, "only against this machine"},
		{"RemoteByName", Options{Server: "https://herald.example.com", APIKey: "k"}, "only against this machine"},
		{"ServerWithoutKey", Options{Server: "http://127.0.0.1:8080"}, "--api-key is required"},
		{"ServerWithDB", Options{Server: "http://127.0.0.1:8080", APIKey: "k", DB: "sqlite://x.db"}, "apply to a spawned Herald"},
		{"ServeArgSetsAddr", Options{ServeArgs: []string{"--addr=0.0.0.0:80"}}, "sets the spawned serve's --addr"},
		{"FanoutNotDividingEndpoints", Options{Endpoints: 10, Fanout: 3}, "multiple of --fanout"},
		{"TooManyConsumers", Options{Endpoints: 10, Fanout: 2, Consumers: 6}, "--consumers must be from 1 to --endpoints / --fanout (5)"},
		{"BatchTooBig", Options{Batch: MaxBatch + 1}, "--batch"},
		{"PayloadTooSmall", Options{PayloadSize: MinPayloadSize - 1}, "--payload-size"},
		{"TooManyEndpoints", Options{Endpoints: MaxEndpoints + 1}, "--endpoints"},
		{"TooManyConnections", Options{Connections: MaxConnections + 1}, "--connections"},
		{"NegativeIdleEndpoints", Options{IdleEndpoints: -5}, "--idle-endpoints must be from 0 to 1000000, not -5"},
		{"TooManyIdleEndpoints", Options{IdleEndpoints: MaxIdleEndpoints + 1}, "--idle-endpoints must be from 0"},
		{"NegativeIdle", Options{Idle: -time.Second}, "--idle must be from 0"},
		{"IdleTooLong", Options{Idle: MaxIdle + time.Second}, "--idle must be from 0"},
		{"SoakAndDuration", Options{Soak: time.Minute, Duration: time.Minute}, "give --soak or --duration, not both"},
		{"SoakAndEvents", Options{Soak: time.Minute, Events: 10}, "give --soak or --events, not both"},
		{"NegativeSoak", Options{Soak: -time.Minute}, "--soak must be from 0 (no soak) to 1h0m0s, not -1m0s"},
		{"SoakTooLong", Options{Soak: MaxDuration + time.Minute}, "--soak must be from 0 (no soak) to 1h0m0s"},
		{"SoakEveryWithoutSoak", Options{SoakEvery: time.Second}, "--soak-every applies to --soak only"},
		{"SoakEveryTooShort", Options{Soak: time.Minute, SoakEvery: time.Millisecond}, "--soak-every must be from 1s to --soak (1m0s)"},
		{"SoakEveryLongerThanSoak", Options{Soak: time.Minute, SoakEvery: 2 * time.Minute}, "--soak-every must be from 1s"},
		{"SoakRateTooMany", Options{Soak: time.Hour, Rate: 5000}, "--rate × --duration"},
		{"NegativeReceiverDelay", Options{ReceiverDelay: -time.Millisecond}, "--receiver-delay must be from 0 to 2m0s, not -1ms"},
		{"ReceiverDelayTooLong", Options{ReceiverDelay: MaxReceiverDelay + time.Second}, "--receiver-delay must be from 0"},
		{"NegativeMaxInFlight", Options{MaxInFlight: -1}, "--max-in-flight must be from 1 to 1000 (0: Herald's default), not -1"},
		{"MaxInFlightTooMany", Options{MaxInFlight: MaxMaxInFlight + 1}, "--max-in-flight must be from 1 to 1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.o.Validate()
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
	t.Run("SoakIsTheDuration", func(t *testing.T) {
		t.Parallel()
		o := Options{Soak: 15 * time.Minute, Rate: 1000}
		require.NoError(t, o.Validate())
		o = o.withDefaults()
		require.Equal(t, 15*time.Minute, o.Duration)
		require.Zero(t, o.Events)
		require.Equal(t, DefaultSoakEvery, o.SoakEvery)
	})
	t.Run("IdleAloneSendsNothing", func(t *testing.T) {
		t.Parallel()
		o := Options{Idle: time.Minute, IdleEndpoints: 100_000}
		require.NoError(t, o.Validate())
		o = o.withDefaults()
		require.Zero(t, o.Events)
		require.Zero(t, o.Duration)
		o = Options{Idle: time.Minute, Events: 10}.withDefaults()
		require.Equal(t, 10, o.Events, "--idle then the load")
	})
	t.Run("ListsEveryProblem", func(t *testing.T) {
		t.Parallel()
		err := Options{Events: -1, Batch: -1, Connections: -1}.Validate()
		require.Error(t, err)
		for _, flag := range []string{"--events", "--batch", "--connections"} {
			require.Contains(t, err.Error(), flag)
		}
	})
}

func TestCheckLoopback(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"http://127.0.0.1:8080", "127.0.0.1:8080", "http://localhost:8080/", "http://[::1]:8080", "https://LOCALHOST"} {
		t.Run("Allows "+ok, func(t *testing.T) {
			t.Parallel()
			require.NoError(t, CheckLoopback(ok))
		})
	}
	for _, bad := range []string{"http://127.0.0.2:8080", "http://192.168.1.5", "http://localhost.example.com", "http://0.0.0.0:8080", "ftp://127.0.0.1"} {
		t.Run("Refuses "+bad, func(t *testing.T) {
			t.Parallel()
			require.Error(t, CheckLoopback(bad))
		})
	}
}

func TestPayload(t *testing.T) {
	t.Parallel()
	for _, size := range []int{MinPayloadSize, 11, 1024, 65536} {
		p := Payload(size)
		require.Len(t, p, size)
		require.True(t, json.Valid(p), "%s", p)
		var obj map[string]string
		require.NoError(t, json.Unmarshal(p, &obj))
	}
}

func TestOrderPayload(t *testing.T) {
	t.Parallel()
	for _, size := range []int{MinPayloadSize, 100, 200, 1024, 65536} {
		p := OrderPayload(size)
		require.Len(t, p, size)
		require.True(t, json.Valid(p), "%s", p)
		if size >= 1024 {
			var order struct {
				Items []map[string]any `json:"items"`
				Note  string           `json:"note"`
			}
			require.NoError(t, json.Unmarshal(p, &order), "%s", p)
			require.NotEmpty(t, order.Items)
			require.NotEmpty(t, order.Note)
		}
	}
	require.Equal(t, OrderPayload(1024), OrderPayload(1024), "the same bytes every run")
	z := store.StoredPayload(OrderPayload(1024), true)
	require.Less(t, len(z), 1024*3/5, "compresses as JSON does")
	require.Greater(t, len(z), 1024/5, "not to nothing, as padding does")
}

func TestProcParsing(t *testing.T) {
	t.Parallel()
	t.Run("CPUFromStat", func(t *testing.T) {
		t.Parallel()
		// A command name with a space and a parenthesis, utime 250, stime 50.
		line := "4242 (herald (x) y) S 1 4242 4242 0 -1 4194560 500 0 0 0 250 50 0 0 20 0 9 0 100 1000000 2000 18446744073709551615\n"
		d, err := parseStatCPU([]byte(line))
		require.NoError(t, err)
		require.Equal(t, 3*time.Second, d)
	})
	t.Run("CPUFromAShortLineFails", func(t *testing.T) {
		t.Parallel()
		_, err := parseStatCPU([]byte("4242 (herald) S 1 2"))
		require.Error(t, err)
	})
	t.Run("ThisProcess", func(t *testing.T) {
		t.Parallel()
		if _, err := os.Stat("/proc/self/stat"); err != nil {
			t.Skipf("no /proc here: %v", err)
		}
		_, err := procCPU("self")
		require.NoError(t, err)
	})
}

func TestSumCounter(t *testing.T) {
	t.Parallel()
	text := `# HELP herald_attempts_total HTTP attempts.
# TYPE herald_attempts_total counter
herald_attempts_total{class="client_error"} 2
herald_attempts_total{class="success"} 1200
herald_attempts_total_other 99
herald_attempts_totally{class="x"} 5
herald_deliveries_total{outcome="delivered"} 1200
`
	require.Equal(t, metrics.NameAttempts, attemptsMetric)
	sum, ok := sumCounter(strings.NewReader(text), attemptsMetric)
	require.True(t, ok)
	require.Equal(t, 1202.0, sum)

	_, ok = sumCounter(strings.NewReader("go_goroutines 12\n"), attemptsMetric)
	require.False(t, ok)
}

// TestSettledAttemptsWaitsForTheCounter serves a /metrics whose attempt
// counter lags the deliveries by a few scrapes, as Herald's does for the
// moment between a receiver answering and Herald reading the answer: the
// bench reads the counter once it has caught up, not the first value.
func TestSettledAttemptsWaitsForTheCounter(t *testing.T) {
	t.Parallel()
	var scrapes atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := min(scrapes.Add(1), 4) // 1, 2, 3, then 4 for good
		fmt.Fprintf(w, "herald_attempts_total{class=\"success\"} %d\n", 6+n)
	}))
	t.Cleanup(srv.Close)
	r := &run{base: srv.URL, hc: srv.Client()}

	got, ok := r.settledAttempts(context.Background(), 6, 4)
	require.True(t, ok)
	require.Equal(t, 10.0, got, "the counter once it counts all 4 deliveries")
	require.Equal(t, int64(4), scrapes.Load())

	t.Run("NoMetrics", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.NotFoundHandler())
		t.Cleanup(srv.Close)
		r := &run{base: srv.URL, hc: srv.Client()}
		_, ok := r.settledAttempts(context.Background(), 0, 4)
		require.False(t, ok, "no /metrics: the report counts deliveries instead")
	})
}
