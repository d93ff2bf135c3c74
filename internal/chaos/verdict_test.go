package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func TestFIFOViolations(t *testing.T) {
	t.Parallel()
	// a acknowledged at 100, b sent at 200: b must wait for a.
	sent := []sentEvent{
		{CID: "a", SentAt: at(0), AckAt: at(100)},
		{CID: "b", SentAt: at(200), AckAt: at(300)},
		// c's call overlapped a's and b's: no order between them.
		{CID: "c", SentAt: at(50), AckAt: at(250)},
	}
	tests := []struct {
		name     string
		arrivals []Arrival
		want     int
	}{
		{"InOrder", []Arrival{
			{CID: "a", At: at(400), Delivered: true},
			{CID: "b", At: at(500), Delivered: true},
			{CID: "c", At: at(600), Delivered: true},
		}, 0},
		{"LaterFirst", []Arrival{
			{CID: "b", At: at(400), Delivered: true},
			{CID: "a", At: at(500), Delivered: true},
		}, 1},
		{"LaterArrivesWhileEarlierOnlyFailed", []Arrival{
			{CID: "a", At: at(400), Delivered: false},
			{CID: "b", At: at(450), Delivered: true},
			{CID: "a", At: at(500), Delivered: true},
		}, 1},
		{"OverlappingCallsInAnyOrder", []Arrival{
			{CID: "c", At: at(400), Delivered: true},
			{CID: "a", At: at(500), Delivered: true},
			{CID: "b", At: at(600), Delivered: true},
		}, 0},
		{"RedeliveryOfEarlierAfterLaterIsFine", []Arrival{
			{CID: "a", At: at(400), Delivered: true},
			{CID: "b", At: at(500), Delivered: true},
			{CID: "a", At: at(600), Delivered: true},
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n, ex := fifoViolations(sent, tt.arrivals)
			require.Equal(t, tt.want, n, "%v", ex)
			require.Len(t, ex, tt.want)
		})
	}
}

func TestRateViolations(t *testing.T) {
	t.Parallel()
	arrivals := func(ms ...int) []Arrival {
		out := make([]Arrival, len(ms))
		for i, m := range ms {
			out[i] = Arrival{At: at(m)}
		}
		return out
	}
	n, peak, _ := rateViolations(arrivals(0, 100, 200, 1000, 1100), 3, time.Second)
	require.Zero(t, n, "a second later the first has left the window")
	require.Equal(t, 3, peak)

	n, peak, ex := rateViolations(arrivals(0, 100, 200, 999), 3, time.Second)
	require.Equal(t, 1, n)
	require.Equal(t, 4, peak)
	require.Contains(t, ex, "4 arrivals")

	n, _, _ = rateViolations(arrivals(900, 0, 950, 100), 3, time.Second)
	require.Equal(t, 1, n, "arrivals are judged in time order")

	n, _, _ = rateViolations(arrivals(0, 100, 200, 950), 3, 900*time.Millisecond)
	require.Zero(t, n, "a shorter window allows for the jitter of arrivals")
}

func TestJudge(t *testing.T) {
	t.Parallel()
	eps := []endpointSpec{{Name: "plain"}, {Name: "fifo", FIFO: true}}
	ok := func(cid, ep, id string, ms int) Arrival {
		return Arrival{CID: cid, Endpoint: ep, WebhookID: id, At: at(ms), Delivered: true, SignatureOK: true, BodyOK: true}
	}
	in := judgeInput{
		backend: "sqlite",
		sent: []sentEvent{
			{CID: "a", SentAt: at(0), AckAt: at(10), EventID: "evt_a"},
			{CID: "b", SentAt: at(20), AckAt: at(30), EventID: "evt_b"},
			{CID: "c", SentAt: at(40)},                       // never acknowledged
			{CID: "d", SentAt: at(40), Rejected: "HTTP 400"}, // refused
		},
		arrivals: []Arrival{
			ok("a", "plain", "evt_a", 800), // taken just before the kill
			ok("a", "fifo", "evt_a", 100),
			ok("b", "fifo", "evt_b", 200),
			ok("b", "fifo", "evt_b", 5000),  // again, in no process fault's window: untraced
			ok("a", "plain", "evt_a", 1100), // again once its lease was lost: traced
			ok("c", "plain", "evt_c", 300),
			{CID: "a", Endpoint: "plain", WebhookID: "evt_a", At: at(150), Fault: Fault500, SignatureOK: true, BodyOK: true},
			{CID: "x", Endpoint: "plain", WebhookID: "evt_x", At: at(150), Delivered: true, SignatureOK: false, BodyOK: true},
		},
		endpoints: eps,
		windows: []Window{
			{Nemesis: Nemesis{Kind: string(KillNode), Target: "serve"}, Start: at(1000), End: at(1500)},
			{Nemesis: Nemesis{Kind: "receiver:hang", Target: "hostile"}, Start: at(4000), End: at(6000)},
		},
		drained: true,
		slack:   500 * time.Millisecond,
	}
	v := judge(in)
	v.Nodes = []NodeReport{{Name: "serve", Starts: 2}}
	v.finish()
	require.Equal(t, 4, v.Sent)
	require.Equal(t, 2, v.Acknowledged)
	require.Equal(t, 1, v.InDoubt)
	require.Equal(t, 1, v.InDoubtDelivered)
	require.Equal(t, 1, v.Rejected)
	require.Equal(t, 4, v.Deliveries)
	require.Equal(t, 3, v.Delivered)
	require.Equal(t, 1, v.Lost, "b never reached plain")
	require.Equal(t, 2, v.Duplicates)
	require.Equal(t, 1, v.DuplicatesTraced, "a to plain was first taken within the kill's window")
	require.Equal(t, 1, v.DuplicatesUntraced)
	require.Equal(t, 1, v.BadSignatures)
	require.False(t, v.Pass)
	require.Len(t, v.Failures, 3, "%v", v.Failures) // lost, rejected, bad signature
}

func TestPlanIsTheSameForASeed(t *testing.T) {
	t.Parallel()
	o := planOptions{load: time.Minute, nodes: []string{"serve", "worker-1", "worker-2"}, db: true, hostile: "hostile", hostileTimeout: time.Second, freezeFor: 8 * time.Second}
	a, b := plan(42, o), plan(42, o)
	require.Equal(t, a, b)
	require.NotEqual(t, a, plan(43, o))

	kinds := map[string]bool{}
	for _, n := range a {
		kinds[n.Kind] = true
		require.LessOrEqual(t, n.At+n.For, o.load, "%+v ends within the load", n)
	}
	for _, k := range []string{string(KillNode), string(FreezeNode), string(CrashDB)} {
		require.True(t, kinds[k], "a minute meets %s", k)
	}
	for _, f := range AllFaults {
		require.True(t, kinds["receiver:"+string(f)], "a minute meets receiver fault %s", f)
	}
	// Faults run one at a time, and a receiver fault's failures have
	// ended (the hostile timeout) before the next fault starts.
	var last time.Duration
	for _, n := range a {
		require.GreaterOrEqual(t, n.At, last, "%+v", n)
		last = n.At + n.For
		if strings.HasPrefix(n.Kind, "receiver:") {
			last += o.hostileTimeout
		}
	}

	require.False(t, kinds[string(Failover)], "no standby, no failover")

	// A short run meets each kind of process fault, the failover of a
	// replicated PostgreSQL included, and every receiver fault.
	for seed := range uint64(20) {
		short := plan(seed, planOptions{load: 40 * time.Second, nodes: []string{"serve", "worker-1", "worker-2"}, db: true, failover: true, hostile: "hostile", hostileTimeout: time.Second, freezeFor: 8 * time.Second})
		kinds := map[string]bool{}
		for _, n := range short {
			kinds[n.Kind] = true
		}
		for _, k := range []string{string(KillNode), string(FreezeNode), string(CrashDB), string(Failover)} {
			require.True(t, kinds[k], "seed %d: 40 s meet %s", seed, k)
		}
		for _, f := range AllFaults {
			require.True(t, kinds["receiver:"+string(f)], "seed %d: 40 s meet receiver fault %s", seed, f)
		}
	}

	sqlite := plan(42, planOptions{load: time.Minute, nodes: []string{"serve"}, hostile: "hostile", hostileTimeout: time.Second, freezeFor: 8 * time.Second})
	for _, n := range sqlite {
		require.NotEqual(t, string(CrashDB), n.Kind, "no database to crash on SQLite")
		require.NotEqual(t, string(Failover), n.Kind, "no standby on SQLite")
	}
}

// TestJudgeFailovers: a node not back at work within recoveryLimit of a
// promotion fails the run; acknowledged events lost by a failover fail it
// with a synchronous standby, and are reported, not failed, with an
// asynchronous one.
func TestJudgeFailovers(t *testing.T) {
	t.Parallel()
	base := func(replication string, failovers ...FailoverReport) *Verdict {
		v := judge(judgeInput{
			backend:   "postgres",
			sent:      []sentEvent{{CID: "a", SentAt: at(0), AckAt: at(10), EventID: "evt_a"}},
			endpoints: []endpointSpec{{Name: "plain"}},
			drained:   true,
		})
		v.Replication, v.Failovers = replication, failovers
		v.finish()
		return v
	}
	quick := FailoverReport{Promoted: at(0), Recovered: map[string]float64{"serve": 0.2, "worker-1": 0.4}}

	v := base(ReplicationSync, quick)
	require.Equal(t, 1, v.Lost)
	require.False(t, v.LostToAsync)
	require.Equal(t, []string{"lost 1 acknowledged deliveries"}, v.Failures)
	require.Contains(t, v.Summary(), "lost 1,")

	v = base(ReplicationAsync, quick)
	require.True(t, v.LostToAsync)
	require.True(t, v.Pass, "%v", v.Failures)
	require.Contains(t, v.Summary(), "lost 1 (asynchronous replication)")

	v = base(ReplicationAsync)
	require.False(t, v.Pass, "no failover happened: the loss is not replication's")

	slow := FailoverReport{Promoted: at(0), Recovered: map[string]float64{"serve": 0.2, "worker-1": 16}, NotRecovered: []string{"worker-2"}}
	v = base(ReplicationAsync, slow)
	require.Equal(t, []string{
		"failover 1: [worker-2] not back at work within 15s of the promotion",
		"failover 1: worker-1 back at work 16.0s after the promotion (limit 15s)",
	}, v.Failures)
}
