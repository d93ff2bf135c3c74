package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store/sqlitestore/sqlitetest"
)

// chromiumPath is Debian's chromium, which .ci/run installs when missing.
const chromiumPath = "/usr/bin/chromium"

// newBrowser starts a headless chromium with a fresh profile (and the
// extra options given) and returns a tab's context; both end with the test.
// browserSteps are the page tests' two verbs on the browser ctx: do runs
// steps, failing the test on an error; text reads the trimmed text of the
// element sel selects.
func browserSteps(t *testing.T, ctx context.Context) (do func(...chromedp.Action[chromedp.Void]), text func(string) string) {
	do = func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		require.NoError(t, chromedp.Do(ctx, steps...))
	}
	text = func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err)
		return strings.TrimSpace(s)
	}
	return do, text
}

func newBrowser(t *testing.T, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("the page tests need Debian's chromium at %s (apt-get install chromium): %v", chromiumPath, err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.WindowSize(1280, 900),
	)
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, 45*time.Second)
	t.Cleanup(func() {
		cancelTime()
		cancelTab()
		cancelAlloc()
	})
	require.NoError(t, chromedp.Do(ctx)) // start the browser now, so its start-up fails here
	return ctx
}

// screenshot writes a PNG of the whole page to $HERALD_SCREENSHOTS/name
// when that is set (make screenshots), and does nothing otherwise.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("HERALD_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG; below, JPEG
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
}

// TestDashboardInABrowser: an operator signs in to /ui/ in a real browser,
// sees the queue's depth sampled by the node charted over the last hour,
// finds a dead delivery in the dead-letter queue, replays it from its page
// and sees it delivered; a bulk replay's dry run shows its count.
func TestDashboardInABrowser(t *testing.T) {
	t.Parallel()
	e := setup(t, "sqlite://"+sqlitetest.Path(t))
	e.runSampler() // 12:00: an empty queue
	var mu sync.Mutex
	status := http.StatusInternalServerError
	rc := newReceiver(t, e.clock, func(_ int, _ *http.Request, w http.ResponseWriter) {
		mu.Lock()
		defer mu.Unlock()
		w.WriteHeader(status)
	})
	e.createEndpoint(map[string]any{"consumer_id": "acme", "url": rc.URL + "/one", "retry_schedule": []string{"0s"}})
	bulk := e.createEndpoint(map[string]any{"consumer_id": "globex", "url": rc.URL + "/bulk", "retry_schedule": []string{"0s"}})
	target := e.send("acme", "order.created", `{"order":{"id":42,"total":"9.99"}}`).Deliveries[0].ID
	var bulkIDs []string
	for range 2 {
		bulkIDs = append(bulkIDs, e.send("globex", "invoice.paid", `{"n":1}`).Deliveries[0].ID)
	}
	// An endpoint that asked for an hour's pause (503 with Retry-After):
	// its deliveries sent since wait, due, in the queue.
	paused := newReceiver(t, e.clock, func(_ int, _ *http.Request, w http.ResponseWriter) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	e.createEndpoint(map[string]any{"consumer_id": "initech", "url": paused.URL})
	first := e.send("initech", "order.shipped", `{"n":1}`).Deliveries[0].ID
	rc.waitHits(t, 3)
	paused.waitHits(t, 1)
	for _, id := range append([]string{target}, bulkIDs...) {
		e.waitStatus(id, "dead")
	}
	waitFor(t, "the paused endpoint's first attempt", func() bool {
		d := e.delivery(first)
		return d.Status == "pending" && d.AttemptCount == 1
	})
	for range 2 {
		e.send("initech", "order.shipped", `{"n":2}`)
	}
	e.settle()
	// 12:01: the sampler samples three dead letters and two deliveries
	// due for a minute; the overview's charts end with the last whole
	// minute, so it shows once 12:02 has begun.
	e.tick(time.Minute)
	e.tick(time.Minute)

	ctx := newBrowser(t)
	base := e.api.URL
	do := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		require.NoError(t, chromedp.Do(ctx, steps...))
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		for try := 0; try < 3 && err != nil && strings.Contains(err.Error(), "No node with given id found"); try++ {
			// The browser renumbered the page's nodes (a late
			// document update after the navigation) between the query
			// and the read: the page is the same, read it again.
			s, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		}
		require.NoError(t, err)
		return strings.TrimSpace(s)
	}

	// Signing in: the dashboard sends a visitor without a session to the
	// sign-in form, where the operator key opens it.
	do(chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#api_key")))
	screenshot(t, ctx, "ui-sign-in.png")
	do(
		chromedp.SendKeys(chromedp.CSS("#api_key"), testAPIKey),
		chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS("#due-now")),
	)
	require.Equal(t, "3", text("#dead-depth"), "the overview counts the three dead deliveries")
	require.Equal(t, "2", text("#due-now"), "and the two waiting for the paused endpoint")
	// The four attempts, three answered 500 and each its delivery's last,
	// one answered 503, in the figures of now and drawn in the last hour's
	// charts.
	require.Equal(t, "0.00 %", text("#success-now"))
	require.Equal(t, "75.0 %", text("#exhausted-now"))
	require.Equal(t, "25.0 %", text("#retry-now"))
	do(chromedp.WaitVisible(chromedp.CSS("#chart-hour-rate polyline.rate")),
		chromedp.WaitVisible(chromedp.CSS("#chart-day-retries polyline.exhausted")))
	// The queue's depth as the sampler took it at 12:01, charted and in
	// the table of numbers.
	do(chromedp.WaitVisible(chromedp.CSS("#chart-hour-due polyline.due")),
		chromedp.WaitVisible(chromedp.CSS("#chart-hour-oldest polyline.oldest")),
		chromedp.WaitVisible(chromedp.CSS("#chart-hour-dead polyline.dead")),
		chromedp.WaitVisible(chromedp.CSS("#chart-day-dead polyline.dead")))
	textContent := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector(`+strconv.Quote(sel)+`).textContent`))
		require.NoError(t, err)
		return strings.TrimSpace(s)
	}
	require.Contains(t, textContent("#hour-due-desc"), "highest 2 at 12:01, last 2.")
	require.Contains(t, textContent("#hour-oldest-desc"), "highest 60.0 s at 12:01, last 60.0 s.")
	require.Contains(t, textContent("#hour-dead-desc"), "highest 3 at 12:01, last 3.")
	require.Contains(t, textContent("#day-dead-desc"), "last 3. Sampled once a minute, each point the highest sample of its 15 minutes")
	lastRow, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll("#numbers-hour tbody tr:last-child td")).slice(-3).map(td => td.textContent)`))
	require.NoError(t, err)
	require.Equal(t, []string{"2", "60.0 s", "3"}, lastRow, "12:01: due now, oldest due, dead letters")
	screenshot(t, ctx, "ui-overview.png")

	// Finding the dead delivery and replaying it.
	link := chromedp.CSS(`a[href="/ui/deliveries/` + target + `"]`)
	do(chromedp.Click(chromedp.CSS("#dead-depth")), chromedp.WaitVisible(link))
	screenshot(t, ctx, "ui-dead-letters.png")
	mu.Lock()
	status = http.StatusOK
	mu.Unlock()
	do(chromedp.Click(link), chromedp.WaitVisible(chromedp.CSS("#replay")))
	require.Equal(t, "dead", text("#delivery-status"))
	do(chromedp.Click(chromedp.CSS("#replay")), chromedp.WaitVisible(chromedp.CSS(".flash.ok")))
	require.Contains(t, text(".flash"), "Replayed")
	e.waitStatus(target, "delivered")
	e.settle()
	do(chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#attempts")))
	require.Equal(t, "delivered", text("#delivery-status"), "the page shows the replayed delivery delivered")
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#attempts tbody tr").length`))
	require.NoError(t, err)
	require.Equal(t, 2, rows, "the failed attempt and the one that delivered")
	screenshot(t, ctx, "ui-delivery.png")

	// A bulk replay's dry run counts and changes nothing.
	group := `section[data-endpoint="` + bulk.ID + `"]`
	do(
		chromedp.Navigate(base+"/ui/dead"),
		chromedp.WaitVisible(chromedp.CSS(group)),
		chromedp.Click(chromedp.CSS(group+` button[name="dry_run"]`)),
		chromedp.WaitVisible(chromedp.CSS(".flash.ok")),
	)
	require.Equal(t, "Dry run: 2 dead deliveries of endpoint "+bulk.ID+" would be replayed.", text(".flash"))
	for _, id := range bulkIDs {
		require.Equal(t, "dead", e.delivery(id).Status, "a dry run replays nothing")
	}

	// Replaying a selection: tick both (the script's select-all box) and send.
	do(
		chromedp.Click(chromedp.CSS(group+` input[data-select-all]`)),
		chromedp.Click(chromedp.CSS(group+` button.replay-selected`)),
	)
	// The page before showed a flash too: wait for the new page's.
	waitFor(t, "the flash after replaying a selection", func() bool {
		flash, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector(".flash") || {}).textContent || ""`))
		return err == nil && flash == "Replayed 2 of 2 deliveries." // err: the page was being replaced
	})
	for _, id := range bulkIDs {
		e.waitStatus(id, "delivered")
	}
	e.settle()

	// The endpoints table leads to an endpoint's page.
	do(
		chromedp.Navigate(base+"/ui/endpoints"),
		chromedp.WaitVisible(chromedp.CSS("#endpoints")),
	)
	screenshot(t, ctx, "ui-endpoints.png")
	// Its URL header sorts it; each row has its health score.
	do(
		chromedp.Click(chromedp.CSS("#sort-url")),
		chromedp.WaitVisible(chromedp.CSS(`th[aria-sort="ascending"] #sort-url`)),
	)
	require.Regexp(t, `^(\d+|—)$`, text(`#row-`+bulk.ID+` td[data-col="score"]`))
	// Its Dead header puts the most dead first, its Health header the
	// worst health first: links, so they work without a script too.
	do(
		chromedp.Click(chromedp.CSS("#sort-dead")),
		chromedp.WaitVisible(chromedp.CSS(`th[aria-sort="descending"] #sort-dead`)),
	)
	dead, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#endpoints td[data-col="dead"]')).map(td => td.textContent)`))
	require.NoError(t, err)
	require.NotEmpty(t, dead)
	require.IsNonIncreasing(t, figuresOf(t, dead), "the most dead first")
	do(
		chromedp.Click(chromedp.CSS("#sort-health")),
		chromedp.WaitVisible(chromedp.CSS(`th[aria-sort="ascending"] #sort-health`)),
	)
	do(
		chromedp.Click(chromedp.CSS(`a[href="/ui/endpoints/`+bulk.ID+`"]`)),
		chromedp.WaitVisible(chromedp.CSS("#endpoint-state")),
	)
	require.Equal(t, "enabled", text("#endpoint-state"))
	screenshot(t, ctx, "ui-endpoint.png")

	// Events: searched by type, and one shown with its payload.
	do(
		chromedp.Navigate(base+"/ui/events?event_type=order.created"),
		chromedp.WaitVisible(chromedp.CSS("#events")),
	)
	screenshot(t, ctx, "ui-events.png")
	do(
		chromedp.Click(chromedp.CSS(`#events a`)),
		chromedp.WaitVisible(chromedp.CSS("#payload")),
	)
	require.Contains(t, text("#payload"), `"total": "9.99"`)
	screenshot(t, ctx, "ui-event.png")
}

// figuresOf reads the counts of a table's column as the dashboard shows
// them ("1,000+" at the limit).
func figuresOf(t *testing.T, cells []string) []int {
	t.Helper()
	out := make([]int, len(cells))
	for i, c := range cells {
		n, err := strconv.Atoi(strings.TrimSuffix(strings.ReplaceAll(c, ",", ""), "+"))
		require.NoError(t, err, "cell %q", c)
		out[i] = n
	}
	return out
}
