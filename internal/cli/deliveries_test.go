package cli_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store"
)

type deliveryJSON struct {
	ID             string  `json:"id"`
	EventID        string  `json:"event_id"`
	EndpointID     string  `json:"endpoint_id"`
	Status         string  `json:"status"`
	AttemptCount   int     `json:"attempt_count"`
	LastStatusCode *int    `json:"last_status_code"`
	DeadReason     *string `json:"dead_reason"`
}

// deliveriesFixture has, for consumer c1, one delivered and one dead
// delivery to ep1, one pending to ep2; and one pending for c2.
type deliveriesFixture struct {
	*apiEnv
	ep1, ep2, ep3                 string
	okEvent, failEvent            string
	delivered, dead, pending, c2p string
}

func setupDeliveries(t *testing.T) *deliveriesFixture {
	t.Helper()
	f := &deliveriesFixture{apiEnv: setupAPI(t)}
	f.ep1 = f.createEndpoint("--consumer", "c1", "--event-type", "ok", "--event-type", "fail")
	f.okEvent = f.send("c1", "ok", `{}`)
	f.failEvent = f.send("c1", "fail", `{}`)
	f.complete(byType(map[string]func(*store.ClaimedDelivery) store.DeliveryOutcome{"ok": delivered, "fail": dead}))
	f.ep2 = f.createEndpoint("--consumer", "c1", "--event-type", "later")
	f.ep3 = f.createEndpoint("--consumer", "c2", "--event-type", "later")
	f.send("c1", "later", `{}`)
	f.send("c2", "later", `{}`)
	f.delivered = f.only("--status", "delivered")
	f.dead = f.only("--status", "dead")
	f.pending = f.only("--status", "pending", "--endpoint", f.ep2)
	f.c2p = f.only("--consumer", "c2")
	return f
}

// only lists deliveries with filters and requires exactly one.
func (f *deliveriesFixture) only(filters ...string) string {
	f.t.Helper()
	ids := lines(f.run(append([]string{"deliveries", "list", "-q"}, filters...)...))
	require.Len(f.t, ids, 1, "filters %v", filters)
	return ids[0]
}

func TestDeliveriesList(t *testing.T) {
	t.Parallel()
	f := setupDeliveries(t)
	t.Run("Table", func(t *testing.T) {
		t.Parallel()
		out := f.run("deliveries", "list", "--consumer", "c1")
		ls := lines(out)
		require.Len(t, ls, 4)
		require.Regexp(t, `^ID\s+STATUS\s+TYPE\s+ENDPOINT\s+ATTEMPTS\s+LAST\s+NEXT ATTEMPT\s+CREATED$`, ls[0])
		require.Equal(t, []string{"dead (exhausted)", "fail", f.ep1, "1", "500 Internal Server Error", "-"}, rowOf(t, out, f.dead)[1:7])
		require.Equal(t, []string{"delivered", "ok", f.ep1, "1", "200 OK", "-"}, rowOf(t, out, f.delivered)[1:7])
		pending := rowOf(t, out, f.pending)
		require.Equal(t, []string{"pending", "later", f.ep2, "0", "-"}, pending[1:6])
		require.Regexp(t, `^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$`, pending[6], "a pending delivery shows when it is due")
		require.NotContains(t, out, f.c2p)
	})
	t.Run("Filters", func(t *testing.T) {
		t.Parallel()
		require.ElementsMatch(t, []string{f.delivered, f.dead}, lines(f.run("deliveries", "list", "--endpoint", f.ep1, "-q")))
		require.Equal(t, []string{f.dead}, lines(f.run("deliveries", "list", "--event", f.failEvent, "-q")))
		require.ElementsMatch(t, []string{f.pending, f.c2p}, lines(f.run("deliveries", "list", "--status", "pending", "-q")))
		require.Equal(t, []string{f.c2p}, lines(f.run("deliveries", "list", "--consumer", "c2", "--status", "pending", "-q")))
		require.Equal(t, "(none)\n", f.run("deliveries", "list", "--status", "cancelled"))
	})
	t.Run("QuietFeedsScripts", func(t *testing.T) {
		t.Parallel()
		// DLV=$(herald deliveries list --status dead -q | head -1)
		require.Equal(t, f.dead+"\n", f.run("deliveries", "list", "--status", "dead", "-q"))
	})
	t.Run("JSON", func(t *testing.T) {
		t.Parallel()
		var page listJSON[deliveryJSON]
		f.runJSON(&page, "deliveries", "list", "--status", "dead")
		require.Len(t, page.Data, 1)
		d := page.Data[0]
		require.Equal(t, f.dead, d.ID)
		require.Equal(t, 500, *d.LastStatusCode)
		require.Equal(t, "exhausted", *d.DeadReason)
	})
	t.Run("BadStatusShowsTheAPICode", func(t *testing.T) {
		t.Parallel()
		err := f.fail("deliveries", "list", "--status", "lost")
		require.True(t, strings.HasPrefix(err.Error(), "invalid_status: "), err.Error())
	})
}

func TestDeliveriesGetAndAttempts(t *testing.T) {
	t.Parallel()
	f := setupDeliveries(t)
	t.Run("Get", func(t *testing.T) {
		t.Parallel()
		out := f.run("deliveries", "get", f.dead)
		require.Equal(t, f.dead, field(t, out, "id"))
		require.Equal(t, "dead (exhausted)", field(t, out, "status"))
		require.Equal(t, f.failEvent, field(t, out, "event"))
		require.Equal(t, f.ep1, field(t, out, "endpoint"))
		require.Equal(t, "1", field(t, out, "attempts"))
		require.Equal(t, "500", field(t, out, "last status code"))
		require.Equal(t, "HTTP 500", field(t, out, "last error"))
	})
	t.Run("GetJSON", func(t *testing.T) {
		t.Parallel()
		var d deliveryJSON
		f.runJSON(&d, "deliveries", "get", f.delivered)
		require.Equal(t, "delivered", d.Status)
		require.Nil(t, d.DeadReason)
	})
	t.Run("Attempts", func(t *testing.T) {
		t.Parallel()
		out := f.run("deliveries", "attempts", f.dead)
		ls := lines(out)
		require.Len(t, ls, 2)
		require.Regexp(t, `^#\s+ID\s+ATTEMPTED\s+DURATION\s+STATUS\s+ERROR\s+RESPONSE$`, ls[0])
		row := strings.Split(ls[1], "  ")
		require.Equal(t, "1", row[0])
		require.Contains(t, ls[1], "12ms")
		require.Contains(t, ls[1], "500")
		require.Contains(t, ls[1], "boom from the receiver")

		ids := lines(f.run("deliveries", "attempts", f.dead, "-q"))
		require.Len(t, ids, 1)
		require.Regexp(t, `^att_`, ids[0])
		require.Equal(t, "(none)\n", f.run("deliveries", "attempts", f.pending))
	})
	t.Run("UnknownIsNotFound", func(t *testing.T) {
		t.Parallel()
		err := f.fail("deliveries", "get", "dlv_nope")
		require.True(t, strings.HasPrefix(err.Error(), "not_found: "), err.Error())
	})
}

func TestDeliveriesReplayCancel(t *testing.T) {
	t.Parallel()
	t.Run("ReplayDead", func(t *testing.T) {
		t.Parallel()
		f := setupDeliveries(t)
		out := f.run("deliveries", "replay", f.dead)
		require.Equal(t, "replayed delivery "+f.dead+": pending again, with a fresh attempt budget\n", out)
		var d deliveryJSON
		f.runJSON(&d, "deliveries", "get", f.dead)
		require.Equal(t, "pending", d.Status)
		require.Len(t, lines(f.run("deliveries", "attempts", f.dead, "-q")), 1, "earlier attempts stay in the log")
	})
	t.Run("ReplayLiveIsAConflict", func(t *testing.T) {
		t.Parallel()
		f := setupDeliveries(t)
		err := f.fail("deliveries", "replay", f.pending)
		require.True(t, strings.HasPrefix(err.Error(), "conflict: "), err.Error())
	})
	t.Run("Cancel", func(t *testing.T) {
		t.Parallel()
		f := setupDeliveries(t)
		require.Equal(t, "cancelled delivery "+f.pending+"\n", f.run("deliveries", "cancel", f.pending))
		var d deliveryJSON
		f.runJSON(&d, "deliveries", "cancel", f.c2p)
		require.Equal(t, "cancelled", d.Status)
		require.ElementsMatch(t, []string{f.pending, f.c2p}, lines(f.run("deliveries", "list", "--status", "cancelled", "-q")))
		err := f.fail("deliveries", "cancel", f.pending)
		require.True(t, strings.HasPrefix(err.Error(), "conflict: "), err.Error())
	})
}

func TestStats(t *testing.T) {
	t.Parallel()
	f := setupDeliveries(t)
	t.Run("Human", func(t *testing.T) {
		t.Parallel()
		out := f.run("stats")
		require.Equal(t, "2", field(t, out, "  pending"))
		require.Equal(t, "0", field(t, out, "  delivering"))
		require.Equal(t, "1", field(t, out, "  delivered"))
		require.Equal(t, "1", field(t, out, "  dead"))
		require.Equal(t, "0", field(t, out, "  cancelled"))
		require.Equal(t, "1", field(t, out, "dead-letter depth"))
		require.Equal(t, "2", field(t, out, "due now"))
	})
	t.Run("JSON", func(t *testing.T) {
		t.Parallel()
		var s struct {
			Deliveries      map[string]int64 `json:"deliveries"`
			DeadLetterDepth int64            `json:"dead_letter_depth"`
			DueNow          int64            `json:"due_now"`
		}
		f.runJSON(&s, "stats")
		require.Equal(t, map[string]int64{"pending": 2, "delivering": 0, "delivered": 1, "dead": 1, "cancelled": 0}, s.Deliveries)
		require.Equal(t, int64(1), s.DeadLetterDepth)
		require.Equal(t, int64(2), s.DueNow)
	})
}

// TestStatsSeries: herald stats --series prints the activity of the last
// hour a line a minute, or of the last day a line per 15 minutes.
func TestStatsSeries(t *testing.T) {
	t.Parallel()
	e := setupAPI(t)
	e.createEndpoint("--consumer", "c1")
	e.send("c1", "order.created", `{}`)
	e.send("c1", "order.created", `{}`)
	// Written two minutes ago, so that the minute is whole.
	at := time.Now().Add(-2 * time.Minute)
	claimed, err := e.store.DeliveryClaim(t.Context(), &store.DeliveryClaimParams{Limit: 10, LeaseMargin: time.Minute})
	require.NoError(t, err)
	require.Len(t, claimed, 2)
	outcomes := []store.DeliveryOutcome{delivered(claimed[0]), dead(claimed[1])}
	for i, c := range claimed {
		outcomes[i].Lease = store.Lease{DeliveryID: c.Delivery.ID, LeaseToken: c.LeaseToken}
		outcomes[i].Attempt.Duration = 30 * time.Millisecond
	}
	_, err = e.store.DeliveryCompleteMany(t.Context(), &store.DeliveryCompleteManyParams{Outcomes: outcomes, Now: at})
	require.NoError(t, err)
	// The queue's depth sampled in that minute: nothing due then, one dead.
	wrote, err := e.store.DepthSample(t.Context(), &store.DepthSampleParams{Now: at})
	require.NoError(t, err)
	require.True(t, wrote)

	out := e.run("stats", "--series", "1h")
	ls := lines(out)
	require.Len(t, ls, 61, "a header and 60 minutes")
	require.Regexp(t, `^FROM\s+ATTEMPTS\s+2XX\s+FAILED\s+RETRIES\s+DEAD\s+PER SEC\s+SUCCESS\s+P50\s+P95\s+DUE NOW\s+OLDEST DUE\s+DEAD LETTERS$`, ls[0])
	var busy []string
	for _, l := range ls[1:] {
		if f := strings.Fields(l); f[2] != "0" {
			busy = f[2:]
		} else {
			require.Equal(t, []string{"-", "-", "-"}, f[len(f)-3:], "no depth sampled: %s", l)
		}
	}
	require.Equal(t, []string{"2", "1", "1", "0", "1", "0.03", "50.0%"}, busy[:7], "the minute of the two attempts")
	require.Regexp(t, `^[23][0-9]\.[0-9]ms$`, busy[7])
	require.Equal(t, []string{"0", "0s", "1"}, busy[9:], "its depth: none due, one dead letter")

	var s struct {
		Window string `json:"window"`
		Step   string `json:"step"`
		Points []struct {
			Attempts int64 `json:"attempts"`
		} `json:"points"`
	}
	e.runJSON(&s, "stats", "--series", "24h")
	require.Equal(t, "24h", s.Window)
	require.Equal(t, "15m", s.Step)
	require.Len(t, s.Points, 96)
	var sum int64
	for _, p := range s.Points {
		sum += p.Attempts
	}
	require.Equal(t, int64(2), sum)

	require.ErrorContains(t, e.fail("stats", "--series", "7d"), "--series must be 1h or 24h")
}

func TestClientErrors(t *testing.T) {
	t.Parallel()
	t.Run("UnreachableServerSaysWhereAndHow", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		gone := httptest.NewServer(http.NotFoundHandler())
		gone.Close()
		e.env["HERALD_SERVER"] = gone.URL
		err := e.fail("stats")
		msg := err.Error()
		require.Contains(t, msg, "cannot reach Herald at "+gone.URL)
		require.Contains(t, msg, "herald serve")
		require.Contains(t, msg, "--server")
		require.Contains(t, msg, "HERALD_SERVER")
	})
	t.Run("ServerFlagWinsOverItsTwin", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		good := e.env["HERALD_SERVER"]
		e.env["HERALD_SERVER"] = "http://127.0.0.1:1"
		require.Contains(t, e.run("stats", "--server", good), "due now")
	})
	t.Run("WrongKeyNamesTheSetting", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		e.env["HERALD_API_KEY"] = "wrong-key-0123456789"
		for _, args := range [][]string{{"stats"}, {"endpoints", "list"}, {"events", "send", "--type", "a.b", "--payload", "{}"}} {
			err := e.fail(args...)
			require.Contains(t, err.Error(), "unauthorized")
			require.Contains(t, err.Error(), "missing or wrong")
			require.Contains(t, err.Error(), "--api-key")
			require.Contains(t, err.Error(), "HERALD_API_KEY")
		}
	})
	t.Run("NoKeyNamesTheSetting", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		delete(e.env, "HERALD_API_KEY")
		err := e.fail("deliveries", "list")
		require.Contains(t, err.Error(), "--api-key")
		require.Contains(t, err.Error(), "HERALD_API_KEY")
		// The flag works as well as the twin.
		require.Equal(t, "(none)\n", e.run("deliveries", "list", "--api-key", apiKey))
	})
	t.Run("BadServerURL", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		require.ErrorContains(t, e.fail("stats", "--server", "ftp://example.com"), "--server")
	})
	t.Run("UnknownSubcommandFails", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		require.ErrorContains(t, e.fail("endpoints", "lsit"), `unknown command "lsit"`)
		require.Contains(t, e.run("deliveries"), "Available Commands")
	})
	t.Run("IDIsRequired", func(t *testing.T) {
		t.Parallel()
		e := setupAPI(t)
		require.ErrorContains(t, e.fail("deliveries", "get"), "give one delivery id")
		require.ErrorContains(t, e.fail("endpoints", "delete", "a", "b"), "give one endpoint id")
	})
}
