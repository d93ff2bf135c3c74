package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/app"
	"github.com/heraldhooks/herald/internal/bench"
	"github.com/heraldhooks/herald/internal/cli"
	"github.com/heraldhooks/herald/internal/client"
	"github.com/heraldhooks/herald/internal/config"
	"github.com/heraldhooks/herald/internal/store/pgstore/pgtest"
	"github.com/heraldhooks/herald/internal/store/sqlitestore/sqlitetest"
)

// benchRun runs `herald bench args...` with env as its environment.
func benchRun(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := cli.New(cli.IO{Out: &out, Err: &errb, Getenv: func(k string) string { return env[k] }})
	cmd.SetArgs(append([]string{"bench"}, args...))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	return result{out: out.String(), err: errb.String(), e: err}
}

// TestBenchSpawnsHeraldAndCountsEveryDelivery runs the bench as a user
// would: it builds the herald binary, and the bench spawns it as
// `herald serve`, sends 200 events to 5 endpoints, and reports every one
// accepted and delivered once, with the child's CPU time and memory.
func TestBenchSpawnsHeraldAndCountsEveryDelivery(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "herald")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/heraldhooks/herald/cmd/herald").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	r := benchRun(t, nil, "--events", "200", "--endpoints", "5", "--herald-binary", bin, "--json", "-q")
	require.NoError(t, r.e, "stdout: %s\nstderr: %s", r.out, r.err)
	var rep bench.Report
	require.NoError(t, json.Unmarshal([]byte(r.out), &rep), "stdout: %s", r.out)

	require.Equal(t, "spawn", rep.Target.Mode)
	require.Equal(t, "sqlite", rep.Target.DB)
	require.Equal(t, int64(200), rep.Events.Sent)
	require.Equal(t, int64(200), rep.Events.Accepted)
	require.Zero(t, rep.Events.Failed)
	require.Zero(t, rep.Events.FanoutMismatches)
	require.Equal(t, int64(200), rep.Deliveries.Expected)
	require.Equal(t, int64(200), rep.Deliveries.Delivered)
	require.Zero(t, rep.Deliveries.Missing)
	require.Zero(t, rep.Deliveries.Duplicated)
	require.Zero(t, rep.Deliveries.Unexpected)
	require.True(t, rep.Deliveries.Drained)
	require.Equal(t, 200, rep.LatencyMS.Samples)
	require.Equal(t, 200, rep.IngestCallMS.Samples, "one ingest call per event (--batch 1)")
	require.Positive(t, rep.IngestCallMS.P50, "an ingest call takes time")
	require.LessOrEqual(t, rep.IngestCallMS.P50, rep.IngestCallMS.P99)
	require.LessOrEqual(t, rep.IngestCallMS.P99, rep.IngestCallMS.Max)
	require.Positive(t, rep.Deliveries.PerSecond)
	if rep.Attempts.Source != "deliveries" { // a build without /metrics counts deliveries
		require.Equal(t, "herald_attempts_total", rep.Attempts.Source)
	}
	require.Equal(t, 200.0, rep.Attempts.Total, "one attempt per delivery")
	require.NotNil(t, rep.Herald.CPUSeconds, "CPU time of the spawned herald")
	require.NotNil(t, rep.Herald.PeakRSSBytes)
	require.Positive(t, *rep.Herald.PeakRSSBytes)
	require.NotNil(t, rep.Herald.CPUMSPerDelivery, "Herald's CPU over its deliveries")
	require.InDelta(t, 1000*(*rep.Herald.CPUSeconds)/200, *rep.Herald.CPUMSPerDelivery, 1e-9)
	require.Nil(t, rep.Herald.PostgresCPUSeconds, "SQLite has no backends")
	require.Nil(t, rep.Herald.PostgresWALBytes, "nor a WAL position to read")
	require.Empty(t, r.err, "-q prints no progress")

	t.Run("PostgreSQL", func(t *testing.T) {
		// On PostgreSQL the database's backends count too: CPU per
		// delivery is Herald's and theirs.
		r := benchRun(t, nil, "--db", pgtest.URL(t), "--events", "200", "--endpoints", "5", "--herald-binary", bin, "--json", "-q")
		require.NoError(t, r.e, "stdout: %s\nstderr: %s", r.out, r.err)
		var rep bench.Report
		require.NoError(t, json.Unmarshal([]byte(r.out), &rep), "stdout: %s", r.out)
		require.Equal(t, int64(200), rep.Deliveries.Delivered)
		require.Empty(t, rep.Herald.PostgresError)
		require.NotNil(t, rep.Herald.PostgresCPUSeconds, "CPU of Herald's database")
		require.Positive(t, *rep.Herald.PostgresCPUSeconds, "200 events cost the database something")
		require.NotNil(t, rep.Herald.CPUMSPerDelivery)
		require.InDelta(t, 1000*(*rep.Herald.CPUSeconds+*rep.Herald.PostgresCPUSeconds)/200, *rep.Herald.CPUMSPerDelivery, 1e-9)
		require.NotNil(t, rep.Herald.PostgresWALBytes, "the WAL the server wrote")
		require.Greater(t, *rep.Herald.PostgresWALBytes, int64(200*1024), "200 events of 1 KiB went through the WAL")
		require.NotNil(t, rep.Herald.WALBytesPerDelivery)
		require.InDelta(t, float64(*rep.Herald.PostgresWALBytes)/200, *rep.Herald.WALBytesPerDelivery, 1e-9)

		r = benchRun(t, nil, "--db", pgtest.URL(t), "--events", "20", "--endpoints", "1", "--herald-binary", bin)
		require.NoError(t, r.e, "stdout: %s\nstderr: %s", r.out, r.err)
		require.Regexp(t, `(?m)^ingest call p99\s+\S+ ms\s*$`, r.out)
		require.Regexp(t, `(?m)^postgres CPU\s+\S+ s\s+the database's backends, about \S+ cores busy$`, r.out)
		require.Regexp(t, `(?m)^CPU per delivery\s+\S+ ms\s+Herald's and its database's CPU time over the deliveries$`, r.out)
		require.Regexp(t, `(?m)^postgres WAL\s+\S+ MiB\s+\d+ bytes a delivery; the server's, every database's$`, r.out)
	})

	t.Run("SlowReceivers", func(t *testing.T) {
		// Receivers that answer in 100 ms, two deliveries in flight an
		// endpoint: 12 events to 2 endpoints take at least 3 rounds of
		// 100 ms, and every delivery still arrives once.
		r := benchRun(t, nil, "--events", "12", "--endpoints", "2", "--connections", "4",
			"--receiver-delay", "100ms", "--max-in-flight", "2", "--herald-binary", bin, "--json", "-q")
		require.NoError(t, r.e, "stdout: %s\nstderr: %s", r.out, r.err)
		var rep bench.Report
		require.NoError(t, json.Unmarshal([]byte(r.out), &rep), "stdout: %s", r.out)
		require.Equal(t, 100.0, rep.Load.ReceiverDelayMS)
		require.Equal(t, 2, rep.Load.MaxInFlight)
		require.Equal(t, int64(12), rep.Deliveries.Delivered)
		require.Zero(t, rep.Deliveries.Missing)
		require.Zero(t, rep.Deliveries.Duplicated)
		require.GreaterOrEqual(t, rep.Deliveries.WindowSeconds, 0.2, "two at a time on each endpoint, 100 ms each")

		r = benchRun(t, nil, "--events", "2", "--endpoints", "1", "--receiver-delay", "20ms", "--max-in-flight", "5", "--herald-binary", bin)
		require.NoError(t, r.e, "stdout: %s\nstderr: %s", r.out, r.err)
		require.Contains(t, r.out, ", 5 in flight an endpoint, receivers answering in 20ms\n")
	})

	t.Run("Shapes", func(t *testing.T) {
		// The same 30 events to 1 endpoint and to 3, with receivers that
		// answer at once and in 30 ms: four runs, each delivering all.
		r := benchRun(t, nil, "--shape", "--shape-endpoints", "1,3", "--shape-delays", "0,30ms", "--events", "30",
			"--max-in-flight", "10", "--herald-binary", bin, "--json", "-q")
		require.NoError(t, r.e, "stdout: %s\nstderr: %s", r.out, r.err)
		var rep bench.ShapeReport
		require.NoError(t, json.Unmarshal([]byte(r.out), &rep), "stdout: %s", r.out)
		require.Len(t, rep.Shapes, 4)
		var names []string
		for _, s := range rep.Shapes {
			names = append(names, s.Name)
			require.Equal(t, s.Endpoints, s.Report.Load.Endpoints, s.Name)
			require.Equal(t, s.ReceiverDelayMS, s.Report.Load.ReceiverDelayMS, s.Name)
			require.Equal(t, int64(30), s.Report.Deliveries.Delivered, s.Name)
			require.Zero(t, s.Report.Deliveries.Missing, s.Name)
		}
		require.Equal(t, []string{"1 endpoint, at once", "1 endpoint, 30ms", "3 endpoints, at once", "3 endpoints, 30ms"}, names)
		require.Empty(t, rep.Behind)
		require.Positive(t, rep.BestP99MS)
		require.InDelta(t, rep.WorstP99MS/rep.BestP99MS, rep.P99Ratio, 1e-9)

		r = benchRun(t, nil, "--shape", "--endpoints", "5", "--herald-binary", bin)
		require.ErrorContains(t, r.e, "--shape sets --endpoints and --receiver-delay itself")
		r = benchRun(t, nil, "--shape-endpoints", "5", "--herald-binary", bin)
		require.ErrorContains(t, r.e, "--shape-endpoints and --shape-delays apply to --shape")
	})
}

// TestBenchIdleEndpointsAndSoak spawns Herald on SQLite with 50 idle
// endpoints: a soak in rows of a second, each with the hot tables' rows
// and the file's free pages, none of the idle endpoints delivered to; and
// the node idle alone, no load, its CPU measured.
func TestBenchIdleEndpointsAndSoak(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "herald")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/heraldhooks/herald/cmd/herald").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	t.Run("Soak", func(t *testing.T) {
		t.Parallel()
		r := benchRun(t, nil, "--herald-binary", bin, "--endpoints", "2", "--idle-endpoints", "50",
			"--soak", "3s", "--soak-every", "1s", "--rate", "40", "--json")
		require.NoError(t, r.e, "stdout: %s\nstderr: %s", r.out, r.err)
		var rep bench.Report
		require.NoError(t, json.Unmarshal([]byte(r.out), &rep), "stdout: %s", r.out)

		require.Equal(t, 50, rep.Load.IdleEndpoints)
		require.Equal(t, 3.0, rep.Load.SoakSeconds)
		require.NotNil(t, rep.IdleEndpoints)
		require.Equal(t, 50, rep.IdleEndpoints.Count)
		require.Positive(t, rep.IdleEndpoints.CreateSeconds)
		require.Nil(t, rep.Idle, "no --idle")
		require.Equal(t, int64(120), rep.Events.Accepted)
		require.Equal(t, int64(120), rep.Deliveries.Delivered)
		require.Zero(t, rep.Deliveries.Unexpected, "no delivery to an idle endpoint")

		require.NotNil(t, rep.Soak)
		require.Equal(t, 1.0, rep.Soak.EverySeconds)
		require.Len(t, rep.Soak.Rows, 3)
		var delivered int
		for i, row := range rep.Soak.Rows {
			require.Equal(t, i+1, row.Minute)
			require.Empty(t, row.TablesError)
			delivered += row.Deliveries
			names := map[string]int64{}
			for _, tb := range row.Tables {
				names[tb.Name] = tb.Rows
				require.Nil(t, tb.Dead, "SQLite counts no dead rows per table")
			}
			require.Equal(t, int64(52), names["endpoints"], "2 endpoints and 50 idle ones")
			require.Contains(t, names, "deliveries")
			require.Contains(t, names, "events")
			require.NotNil(t, row.FreelistPages)
			require.NotNil(t, row.Pages)
		}
		require.Equal(t, 120, delivered, "each delivery in one row")
		require.NotNil(t, rep.Soak.P99Ratio)
		require.Contains(t, r.err, "bench: soak row 1: ")
		require.Contains(t, r.err, "freelist_count")
	})
	t.Run("Hanging", func(t *testing.T) {
		t.Parallel()
		r := benchRun(t, nil, "--herald-binary", bin, "--endpoints", "2", "--duration", "3s", "--rate", "40",
			"--hanging-endpoints", "4", "--hanging-rate", "8", "--hanging-timeout", "1s", "--json")
		require.NoError(t, r.e, "stdout: %s\nstderr: %s", r.out, r.err)
		var rep bench.Report
		require.NoError(t, json.Unmarshal([]byte(r.out), &rep), "stdout: %s", r.out)
		h := rep.Hanging
		require.NotNil(t, h)
		require.Equal(t, 4, h.Endpoints)
		require.Equal(t, 8.0, h.Rate)
		require.Equal(t, 1.0, h.TimeoutSeconds)
		require.GreaterOrEqual(t, h.Sent, int64(20), "8/s for 3 s")
		require.Equal(t, h.Sent, h.Accepted+h.Failed)
		require.Zero(t, h.Failed)
		require.Positive(t, h.Arrived, "Herald attempted the hanging endpoints")
		require.Positive(t, h.PeakOpen)
		// The load is counted alone: every event to the healthy
		// endpoints delivered, nothing unexpected.
		require.Equal(t, rep.Events.Accepted, rep.Deliveries.Delivered)
		require.Equal(t, int64(120), rep.Events.Accepted)
		require.Zero(t, rep.Deliveries.Unexpected)
		require.Zero(t, rep.Deliveries.Missing)
	})
	t.Run("IdleAlone", func(t *testing.T) {
		t.Parallel()
		r := benchRun(t, nil, "--herald-binary", bin, "--endpoints", "1", "--idle-endpoints", "20", "--idle", "1s", "-q")
		require.NoError(t, r.e, "stdout: %s\nstderr: %s", r.out, r.err)
		require.Contains(t, r.out, "herald bench: no load, idle for 1s, 1 endpoint of 1 consumer, beside 20 idle endpoints")
		require.Regexp(t, `(?m)^idle endpoints\s+20\s+created in `, r.out)
		require.Regexp(t, `(?m)^idle herald CPU\s+\S+ %\s+of one core: `, r.out)
		require.NotContains(t, r.out, "events accepted", "nothing was sent")
	})
}

// benchKey is the API key of the Herald startHerald runs.
const benchKey = "hk_bench_test_key_0123456789"

// startHerald runs a Herald node (API and dispatcher over SQLite) in this
// process and returns its URL.
func startHerald(t *testing.T, allowPrivate bool) string {
	t.Helper()
	cfg := config.Default()
	cfg.DB = "sqlite://" + sqlitetest.Path(t)
	cfg.APIKey = benchKey
	cfg.AllowPrivateNetworks = allowPrivate
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, cfg, app.Deps{}, true)
	require.NoError(t, err)
	srv := httptest.NewServer(a.Handler)
	dispatched := make(chan error, 1)
	go func() { dispatched <- a.Dispatcher.Run(ctx) }()
	t.Cleanup(func() {
		srv.Close()
		cancel()
		<-dispatched
		a.Close()
	})
	return srv.URL
}

// TestBenchAgainstARunningServer points the bench at a Herald running in
// this process: batches, a fanout of 5 to one consumer's endpoints,
// signatures and bodies verified, the text report, CPU unknown, and the
// bench's endpoints deleted afterwards.
func TestBenchAgainstARunningServer(t *testing.T) {
	t.Parallel()
	url := startHerald(t, true)
	r := benchRun(t, map[string]string{"HERALD_BENCH_API_KEY": benchKey},
		"--server", url, "--events", "100", "--endpoints", "5", "--fanout", "5", "--consumers", "1",
		"--batch", "25", "--connections", "2", "--payload-size", "300", "--verify")
	require.NoError(t, r.e, "stdout: %s\nstderr: %s", r.out, r.err)

	row := func(name string) string {
		t.Helper()
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\s{2,}(\S+)`).FindStringSubmatch(r.out)
		require.NotNil(t, m, "no row %q in:\n%s", name, r.out)
		return m[1]
	}
	require.Equal(t, "100", row("events accepted"))
	require.Equal(t, "500", row("deliveries"))
	require.Equal(t, "0", row("missing"))
	require.Equal(t, "0", row("duplicated"))
	require.Equal(t, "0", row("invalid signatures"))
	require.Equal(t, "0", row("changed bodies"))
	require.Equal(t, "unknown", row("herald CPU"))
	require.Equal(t, "unknown", row("herald peak RSS"))
	require.Regexp(t, `(?m)^attempts/s\s+\S+\s+from (herald_attempts_total|deliveries)$`, r.out)
	require.Contains(t, r.out, "includes about half the ingest call's round trip")

	api, err := client.New(url, benchKey, client.Options{})
	require.NoError(t, err)
	left, err := api.EndpointList(context.Background(), &client.EndpointListParams{})
	require.NoError(t, err)
	require.Empty(t, left.Data, "the bench deletes the endpoints it made on a server's database")
}

func TestBenchRefusesBadFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"NonLoopbackServer", nil, []string{"--server", "http://10.20.30.40:8080", "--api-key", "k"}, "only against this machine"},
		{"NonLoopbackServerFromItsTwin", map[string]string{"HERALD_BENCH_SERVER": "https://herald.example.com", "HERALD_BENCH_API_KEY": "k"}, nil, "only against this machine"},
		{"TooManyEvents", nil, []string{"--events", "10000001"}, "--events must be from 1 to 10000000"},
		{"TooLong", nil, []string{"--duration", "61m"}, "--duration must be at most 1h0m0s"},
		{"SpawnAndServer", nil, []string{"--spawn", "--server", "http://127.0.0.1:8080", "--api-key", "k"}, "not both"},
		{"NeitherSpawnNorServer", nil, []string{"--spawn=false"}, "needs --server"},
		{"StrayArgument", nil, []string{"fast"}, "serve flags go after --"},
		{"NegativeIdleEndpoints", nil, []string{"--idle-endpoints", "-1"}, "--idle-endpoints must be from 0 to 1000000, not -1"},
		{"SoakAndDuration", nil, []string{"--soak", "15m", "--duration", "1m"}, "give --soak or --duration, not both"},
		{"SoakEveryAlone", map[string]string{"HERALD_BENCH_SOAK_EVERY": "10s"}, nil, "--soak-every applies to --soak only"},
		{"NegativeIdle", nil, []string{"--idle", "-1s"}, "--idle must be from 0"},
		{"HangingRateAlone", nil, []string{"--hanging-rate", "5"}, "--hanging-rate and --hanging-timeout apply to --hanging-endpoints"},
		{"HangingTimeoutTooLong", nil, []string{"--hanging-endpoints", "3", "--hanging-timeout", "2m"}, "--hanging-timeout must be from 0 (Herald's default) to 1m0s, not 2m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := benchRun(t, tc.env, tc.args...)
			require.Error(t, r.e)
			require.Contains(t, r.e.Error(), tc.want)
			require.Empty(t, strings.TrimSpace(r.out), "nothing ran, so nothing is reported")
		})
	}
	t.Run("ServerRefusingLoopbackIsExplained", func(t *testing.T) {
		t.Parallel()
		r := benchRun(t, nil, "--server", startHerald(t, false), "--api-key", benchKey, "--events", "1", "--endpoints", "1")
		require.Error(t, r.e)
		require.Contains(t, r.e.Error(), "run that Herald with --allow-private-networks")
	})
	t.Run("ClientTwinsDoNotReachTheBench", func(t *testing.T) {
		t.Parallel()
		// HERALD_SERVER is the client commands'; the bench ignores it, so
		// it spawns (here: a binary that is not there) rather than measure
		// that server.
		r := benchRun(t, map[string]string{"HERALD_SERVER": "http://10.20.30.40:8080", "HERALD_API_KEY": "k"},
			"--herald-binary", filepath.Join(t.TempDir(), "no-such-herald"), "--events", "1")
		require.Error(t, r.e)
		require.Contains(t, r.e.Error(), "no-such-herald")
	})
}
