package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/api"
	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/config"
	"github.com/heraldhooks/herald/internal/notice"
	"github.com/heraldhooks/herald/internal/notice/smtptest"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/store/pgstore"
	"github.com/heraldhooks/herald/internal/store/pgstore/pgtest"
	"github.com/heraldhooks/herald/internal/store/sqlitestore"
	"github.com/heraldhooks/herald/internal/store/sqlitestore/sqlitetest"
)

const testKey = "hk_test_key_0123456789"

// start is the test clock's first reading.
var start = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

type env struct {
	t     *testing.T
	url   string
	store store.Store
	clock *clock.Test
	spec  *spec
	// cfg is the API's configuration, for another node (node).
	cfg api.Config
}

type options struct {
	allowPrivate bool
	maxPayload   int
	maxBatch     int
	// maxEndpoints is the API's MaxEndpointsPerConsumer (0: no limit).
	maxEndpoints int
	// wrap, when set, stands between the API and the store.
	wrap func(store.Store) store.Store
	// logger, when set, receives the API's log.
	logger *slog.Logger
	// notify, when set, is the API's Notify.
	notify func(herald.Notification)
	// postgres serves a fresh PostgreSQL store instead of SQLite.
	postgres bool
	// mail, when set, is the SMTP server confirmation links are mailed
	// through (the API's Confirmations, links to https://hooks.example.com).
	mail *smtptest.Server
	// config, when set, changes the API's configuration last.
	config func(*api.Config)
}

// onPostgres is the setup option that serves a PostgreSQL store.
func onPostgres(o *options) { o.postgres = true }

// setup serves a fresh API over a fresh SQLite store.
func setup(t *testing.T, opts ...func(*options)) *env {
	t.Helper()
	var o options
	for _, f := range opts {
		f(&o)
	}
	ctx := context.Background()
	var st interface {
		store.Store
		Migrate(context.Context) error
		Close() error
	}
	if o.postgres {
		pg, err := pgstore.Open(ctx, pgtest.URL(t), nil)
		require.NoError(t, err)
		st = pg
	} else {
		lite, err := sqlitestore.Open(ctx, sqlitetest.Path(t), nil)
		require.NoError(t, err)
		st = lite
	}
	t.Cleanup(func() { st.Close() })
	require.NoError(t, st.Migrate(ctx))
	doc, err := parseSpec()
	require.NoError(t, err)
	clk := clock.NewTest(start)
	var served store.Store = st
	if o.wrap != nil {
		served = o.wrap(st)
	}
	var confirmations api.ConfirmationMailer
	if o.mail != nil {
		confirmations = runMailer(t, st, clk, o.mail)
	}
	cfg := api.Config{
		Store:                   served,
		Clock:                   clk,
		Logger:                  o.logger,
		APIKeyHash:              sha256.Sum256([]byte(testKey)),
		AllowPrivateNetworks:    o.allowPrivate,
		MaxPayloadBytes:         o.maxPayload,
		MaxBatchBytes:           o.maxBatch,
		MaxEndpointsPerConsumer: o.maxEndpoints,
		Notify:                  o.notify,
		Confirmations:           confirmations,
	}
	if o.config != nil {
		o.config(&cfg)
	}
	srv := httptest.NewServer(api.New(cfg))
	t.Cleanup(srv.Close)
	return &env{t: t, url: srv.URL, store: st, clock: clk, spec: doc, cfg: cfg}
}

// runMailer runs, until the test ends, a node's mailer that sends
// confirmation mails through mail with links to
// https://hooks.example.com, trying a refused one again at once.
func runMailer(t *testing.T, st store.Store, clk *clock.Test, mail *smtptest.Server) *notice.Mailer {
	t.Helper()
	cfg, err := config.ParseSMTP(mail.URL, "")
	require.NoError(t, err)
	sender := notice.NewSMTP(cfg)
	m := notice.New(notice.Config{
		Store: st, Sender: sender, Clock: clk, Retries: []time.Duration{0, 0},
		Confirmer: notice.NewConfirmer(sender, "https://hooks.example.com", nil),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return m
}

// node is another API node over e's store and clock, as a second
// `herald serve` over the same database: it shares nothing with e's
// server but the store.
func (e *env) node() *env {
	e.t.Helper()
	srv := httptest.NewServer(api.New(e.cfg))
	e.t.Cleanup(srv.Close)
	other := *e
	other.url = srv.URL
	return &other
}

// response is one answer.
type response struct {
	t      *testing.T
	status int
	header http.Header
	body   []byte
}

// do sends body (a string as is, anything else as JSON, nil for none) with
// the API key, and extra headers as name/value pairs. Every exchange is
// checked against openapi.json (spec.checkExchange): a status, field or
// error code the document does not list fails the test.
func (e *env) do(method, path string, body any, headers ...string) *response {
	e.t.Helper()
	return e.doKey(testKey, method, path, body, headers...)
}

func (e *env) doKey(key, method, path string, body any, headers ...string) *response {
	e.t.Helper()
	var rd io.Reader
	var sent []byte
	switch b := body.(type) {
	case nil:
	case string:
		sent = []byte(b)
	case []byte:
		sent = b
	default:
		raw, err := json.Marshal(b)
		require.NoError(e.t, err)
		sent = raw
	}
	if body != nil {
		rd = bytes.NewReader(sent)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	require.NoError(e.t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(e.t, err)
	for _, p := range e.spec.checkExchange(method, req.URL, sent, res.StatusCode, res.Header, raw) {
		e.t.Errorf("openapi.json: %s", p)
	}
	return &response{t: e.t, status: res.StatusCode, header: res.Header, body: raw}
}

// must checks the status and decodes the body into out (when not nil).
func (r *response) must(status int, out any) *response {
	r.t.Helper()
	require.Equal(r.t, status, r.status, "body: %s", r.body)
	if out != nil {
		require.NoError(r.t, json.Unmarshal(r.body, out), "body: %s", r.body)
	}
	return r
}

// apiErr checks an error answer's status and code, and returns its message.
func (r *response) apiErr(status int, code string) string {
	r.t.Helper()
	require.Equal(r.t, status, r.status, "body: %s", r.body)
	require.Equal(r.t, "application/json", r.header.Get("Content-Type"))
	var out struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	require.NoError(r.t, json.Unmarshal(r.body, &out), "body: %s", r.body)
	require.Equal(r.t, code, out.Error.Code, "message: %s", out.Error.Message)
	require.NotEmpty(r.t, out.Error.Message)
	return out.Error.Message
}

// The answer shapes the tests read.

type endpointOut struct {
	ID                       string            `json:"id"`
	ConsumerID               string            `json:"consumer_id"`
	URL                      string            `json:"url"`
	Description              string            `json:"description"`
	EventTypes               []string          `json:"event_types"`
	Secret                   string            `json:"secret"`
	PreviousSecretExpiresAt  *time.Time        `json:"previous_secret_expires_at"`
	Enabled                  bool              `json:"enabled"`
	DisabledReason           string            `json:"disabled_reason"`
	Timeout                  string            `json:"timeout"`
	RetrySchedule            []string          `json:"retry_schedule"`
	RetryPolicy              *retryPolicyOut   `json:"retry_policy"`
	RetryClientErrors        bool              `json:"retry_client_errors"`
	RateLimit                *rateLimitOut     `json:"rate_limit"`
	MaxInFlight              int               `json:"max_in_flight"`
	SignatureScheme          string            `json:"signature_scheme"`
	Headers                  map[string]string `json:"headers"`
	Ordering                 string            `json:"ordering"`
	AutoDisableAfterFailures int               `json:"auto_disable_after_failures"`
	AutoDisableAfter         string            `json:"auto_disable_after"`
	Health                   healthOut         `json:"health"`
	CreatedAt                time.Time         `json:"created_at"`
	UpdatedAt                time.Time         `json:"updated_at"`
}

type healthOut struct {
	BreakerState        string     `json:"breaker_state"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	FailingSince        *time.Time `json:"failing_since"`
	LastSuccessAt       *time.Time `json:"last_success_at"`
	LastFailureAt       *time.Time `json:"last_failure_at"`
	ProbeAt             *time.Time `json:"probe_at"`
	PausedUntil         *time.Time `json:"paused_until"`
	RateFactor          float64    `json:"rate_factor"`
	SuccessRate1h       *float64   `json:"success_rate_1h"`
	Attempts1h          int        `json:"attempts_1h"`
	InFlight            *int       `json:"in_flight"`
	Due                 *int       `json:"due"`
	Dead                *int       `json:"dead"`
	Score               *int       `json:"score"`
}

// replayedOut answers a bulk replay.
type replayedOut struct {
	Replayed int  `json:"replayed"`
	DryRun   bool `json:"dry_run"`
}

type retryPolicyOut struct {
	Type     string  `json:"type"`
	Base     string  `json:"base"`
	Factor   float64 `json:"factor"`
	Cap      string  `json:"cap"`
	Attempts int     `json:"attempts"`
}

type rateLimitOut struct {
	PerSecond float64 `json:"per_second"`
	Burst     int     `json:"burst"`
}

type ingestOut struct {
	ID         string `json:"id"`
	Duplicate  bool   `json:"duplicate"`
	Deliveries []struct {
		ID         string `json:"id"`
		EndpointID string `json:"endpoint_id"`
	} `json:"deliveries"`
}

type eventOut struct {
	ID             string        `json:"id"`
	ConsumerID     string        `json:"consumer_id"`
	EventType      string        `json:"event_type"`
	IdempotencyKey string        `json:"idempotency_key"`
	CreatedAt      time.Time     `json:"created_at"`
	Payload        rawBytes      `json:"payload"`
	Deliveries     []deliveryOut `json:"deliveries"`
}

type deliveryOut struct {
	ID             string     `json:"id"`
	EventID        string     `json:"event_id"`
	EndpointID     string     `json:"endpoint_id"`
	ConsumerID     string     `json:"consumer_id"`
	EventType      string     `json:"event_type"`
	Status         string     `json:"status"`
	AttemptCount   int        `json:"attempt_count"`
	NextAttemptAt  *time.Time `json:"next_attempt_at"`
	LastStatusCode *int       `json:"last_status_code"`
	LastError      string     `json:"last_error"`
	DeadReason     *string    `json:"dead_reason"`
	CreatedAt      time.Time  `json:"created_at"`
	DeliveredAt    *time.Time `json:"delivered_at"`
}

type listOut[T any] struct {
	Data       []T    `json:"data"`
	NextCursor string `json:"next_cursor"`
}

// rawBytes keeps a JSON value's bytes exactly as they came (json.RawMessage
// would do too, but this says so).
type rawBytes []byte

func (r *rawBytes) UnmarshalJSON(b []byte) error { *r = append((*r)[:0], b...); return nil }

// createEndpoint creates an endpoint and returns it.
func (e *env) createEndpoint(body map[string]any) endpointOut {
	e.t.Helper()
	if _, ok := body["url"]; !ok {
		body["url"] = "https://example.com/hooks"
	}
	var ep endpointOut
	e.do("POST", "/v1/endpoints", body).must(http.StatusCreated, &ep)
	return ep
}

// send ingests one event whose payload is the raw JSON text payload.
func (e *env) send(consumer, eventType, payload string) ingestOut {
	e.t.Helper()
	body := `{"consumer_id":` + quote(consumer) + `,"event_type":` + quote(eventType) + `,"payload":` + payload + `}`
	var out ingestOut
	e.do("POST", "/v1/events", body).must(http.StatusAccepted, &out)
	return out
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// ptr is a pointer to v.
func ptr[T any](v T) *T { return &v }

// withoutFigures is ep without the figures only GET one endpoint (and a
// list with include=health) fills, to compare it with other answers.
func withoutFigures(ep endpointOut) endpointOut {
	ep.Health.InFlight, ep.Health.Due, ep.Health.Dead, ep.Health.Score = nil, nil, nil, nil
	return ep
}
