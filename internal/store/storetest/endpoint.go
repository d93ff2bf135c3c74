package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

func endpointCases() []testCase {
	return []testCase{
		{"CreateGetRoundTripsEveryField", testEndpointRoundTrip},
		{"CreateMinimalKeepsEmptySettingsEmpty", testEndpointMinimal},
		{"CreateWithIDKeepsIt", testEndpointCreateWithID},
		{"GetUnknownIsNotFound", testEndpointGetUnknown},
		{"ListFiltersByConsumerNewestFirst", testEndpointListConsumer},
		{"ListPaginatesWithoutGapsOrDuplicates", testEndpointListPages},
		{"UpdateReplacesSettingsOnly", testEndpointUpdate},
		{"DeleteCancelsLiveDeliveriesAndKeepsHistory", testEndpointDelete},
		{"DisableSendsLiveDeliveriesDead", testEndpointDisable},
		{"EnableClearsReasonAndAllowsReplay", testEndpointEnable},
		{"RotateSecretKeepsPrevious", testEndpointRotate},
	}
}

// fullEndpoint sets every field an endpoint has.
func fullEndpoint() *herald.Endpoint {
	return &herald.Endpoint{
		ConsumerID:  "cust_42",
		URL:         "https://hooks.example.com/herald?team=a&x=%20",
		Description: "orders — ünïcode, \"quotes\"",
		EventTypes:  []string{"order.*", "invoice.paid"},
		Secret:      "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD",
		Enabled:     true,
		Timeout:     15 * time.Second,
		RetrySchedule: []time.Duration{
			0, 1500 * time.Millisecond, 5 * time.Minute, 36 * time.Hour,
		},
		RetryExponential:  &herald.ExponentialPolicy{Base: 2 * time.Second, Factor: 1.5, Cap: time.Hour, Attempts: 9},
		RetryClientErrors: true,
		RateLimit:         &herald.RateLimit{PerSecond: 12.5, Burst: 40},
		MaxInFlight:       7,
		SignatureScheme:   herald.SchemeHMACSHA256,
		Headers:           map[string]string{"X-Team": "a", "X-Env": "prod ünï"},
		Ordering:          herald.OrderingFIFO,
		// Past 32 bits in nanoseconds.
		AutoDisableAfterFailures: 7,
		AutoDisableAfter:         36*time.Hour + time.Second,
		Health:                   herald.NewEndpointHealth(),
	}
}

// requireEndpoint checks that got equals want in every field, times to
// the microsecond.
func requireEndpoint(t *testing.T, want, got *herald.Endpoint) {
	t.Helper()
	w, g := *want, *got
	w.CreatedAt, g.CreatedAt = utcMicro(w.CreatedAt), utcMicro(g.CreatedAt)
	w.UpdatedAt, g.UpdatedAt = utcMicro(w.UpdatedAt), utcMicro(g.UpdatedAt)
	if w.PreviousSecretExpiresAt != nil {
		v := utcMicro(*w.PreviousSecretExpiresAt)
		w.PreviousSecretExpiresAt = &v
	}
	if g.PreviousSecretExpiresAt != nil {
		v := utcMicro(*g.PreviousSecretExpiresAt)
		g.PreviousSecretExpiresAt = &v
	}
	require.Equal(t, w, g)
}

func testEndpointRoundTrip(t *testing.T, s store.Store) {
	in := fullEndpoint()
	// Health is Herald's to keep: what a caller passes is not stored.
	in.Health.BreakerState = herald.BreakerOpen
	in.Health.ConsecutiveFailures = 9
	in.Health.RateFactor = 0.25
	created := createEndpoint(t, s, in, at(0))

	require.Regexp(t, `^ep_[0-9a-z]{26}$`, created.ID)
	want := fullEndpoint()
	want.ID = created.ID
	want.CreatedAt = at(0)
	want.UpdatedAt = at(0)
	requireEndpoint(t, want, created)

	got, err := s.EndpointGet(t.Context(), created.ID)
	require.NoError(t, err)
	requireEndpoint(t, want, got)
	require.Nil(t, got.PreviousSecretExpiresAt)
}

func testEndpointMinimal(t *testing.T, s store.Store) {
	created := createEndpoint(t, s, &herald.Endpoint{
		ConsumerID: "c",
		URL:        "https://a.example.com/",
		EventTypes: []string{"*"},
		Secret:     "whsec_x",
		Enabled:    true,
	}, at(0))

	got, err := s.EndpointGet(t.Context(), created.ID)
	require.NoError(t, err)
	require.Equal(t, "c", got.ConsumerID)
	require.Equal(t, "https://a.example.com/", got.URL)
	require.Equal(t, []string{"*"}, got.EventTypes)
	require.Equal(t, "whsec_x", got.Secret)
	require.True(t, got.Enabled)
	require.Empty(t, got.Description)
	require.Empty(t, got.DisabledReason)
	require.Empty(t, got.PreviousSecret)
	require.Nil(t, got.PreviousSecretExpiresAt)
	require.Zero(t, got.Timeout)
	require.Empty(t, got.RetrySchedule)
	require.Nil(t, got.RetryExponential)
	require.False(t, got.RetryClientErrors)
	require.Nil(t, got.RateLimit)
	require.Zero(t, got.MaxInFlight)
	require.Empty(t, got.Headers)
	require.Equal(t, herald.OrderingNone, got.Ordering)
	require.Zero(t, got.AutoDisableAfterFailures)
	require.Zero(t, got.AutoDisableAfter)
	require.Equal(t, herald.NewEndpointHealth(), got.Health, "an endpoint starts healthy")
	requireTime(t, at(0), got.CreatedAt)
}

func testEndpointCreateWithID(t *testing.T, s store.Store) {
	ep := newEndpoint("c")
	ep.ID = "ep_01jgkx0000customid00000000"
	created := createEndpoint(t, s, ep, at(0))
	require.Equal(t, ep.ID, created.ID)

	got, err := s.EndpointGet(t.Context(), ep.ID)
	require.NoError(t, err)
	require.Equal(t, ep.ID, got.ID)

	again := newEndpoint("other")
	again.ID = ep.ID
	_, err = s.EndpointCreate(t.Context(), &store.EndpointCreateParams{Endpoint: again, Now: at(time.Second)})
	expectConflict(t, err)

	got, err = s.EndpointGet(t.Context(), ep.ID)
	require.NoError(t, err)
	require.Equal(t, "c", got.ConsumerID, "the first endpoint is untouched")
}

func testEndpointGetUnknown(t *testing.T, s store.Store) {
	_, err := s.EndpointGet(t.Context(), "ep_00000000000000000000000000")
	expectNotFound(t, err)
}

func testEndpointListConsumer(t *testing.T, s store.Store) {
	var a, b []string
	for i := range 3 {
		a = append(a, createEndpoint(t, s, newEndpoint("cust_a"), at(time.Duration(2*i)*time.Second)).ID)
		b = append(b, createEndpoint(t, s, newEndpoint("cust_b"), at(time.Duration(2*i+1)*time.Second)).ID)
	}

	page, err := s.EndpointList(t.Context(), &store.EndpointListParams{ConsumerID: "cust_a"})
	require.NoError(t, err)
	require.Empty(t, page.NextCursor)
	require.Equal(t, reversed(a), endpointIDs(page.Items))
	for _, ep := range page.Items {
		require.Equal(t, "cust_a", ep.ConsumerID)
		require.NotEmpty(t, ep.Secret)
	}

	page, err = s.EndpointList(t.Context(), &store.EndpointListParams{ConsumerID: "nobody"})
	require.NoError(t, err)
	require.Empty(t, page.Items)
	require.Empty(t, page.NextCursor)

	page, err = s.EndpointList(t.Context(), &store.EndpointListParams{})
	require.NoError(t, err)
	all := []string{b[2], a[2], b[1], a[1], b[0], a[0]}
	require.Equal(t, all, endpointIDs(page.Items), "no consumer lists all, newest first")
}

func endpointIDs(eps []*herald.Endpoint) []string {
	ids := make([]string, len(eps))
	for i, ep := range eps {
		ids[i] = ep.ID
	}
	return ids
}

func testEndpointListPages(t *testing.T, s store.Store) {
	var ids []string
	for i := range 7 {
		ids = append(ids, createEndpoint(t, s, newEndpoint("cust_p"), at(time.Duration(i)*time.Second)).ID)
	}
	createEndpoint(t, s, newEndpoint("cust_other"), at(time.Hour))
	list := func(limit int) func(string) (*store.Page[*herald.Endpoint], error) {
		return func(cursor string) (*store.Page[*herald.Endpoint], error) {
			return s.EndpointList(t.Context(), &store.EndpointListParams{ConsumerID: "cust_p", Cursor: cursor, Limit: limit})
		}
	}
	id := func(ep *herald.Endpoint) string { return ep.ID }

	for _, limit := range []int{1, 2, 3, 7, 8} {
		require.Equal(t, reversed(ids), collect(t, limit, id, list(limit)), "limit %d", limit)
	}

	// A page of exactly the rows left is the last: no cursor to an empty page.
	page, err := s.EndpointList(t.Context(), &store.EndpointListParams{ConsumerID: "cust_p", Limit: 7})
	require.NoError(t, err)
	require.Len(t, page.Items, 7)
	require.Empty(t, page.NextCursor)

	// A limit of 0 means the default.
	page, err = s.EndpointList(t.Context(), &store.EndpointListParams{ConsumerID: "cust_p"})
	require.NoError(t, err)
	require.Len(t, page.Items, 7)

	// Rows added while paging do not shift later pages.
	first, err := s.EndpointList(t.Context(), &store.EndpointListParams{ConsumerID: "cust_p", Limit: 3})
	require.NoError(t, err)
	require.NotEmpty(t, first.NextCursor)
	createEndpoint(t, s, newEndpoint("cust_p"), at(time.Minute))
	rest := collect(t, 3, id, func(cursor string) (*store.Page[*herald.Endpoint], error) {
		if cursor == "" {
			cursor = first.NextCursor
		}
		return s.EndpointList(t.Context(), &store.EndpointListParams{ConsumerID: "cust_p", Cursor: cursor, Limit: 3})
	})
	require.Equal(t, reversed(ids), append(endpointIDs(first.Items), rest...))
}

func testEndpointUpdate(t *testing.T, s store.Store) {
	orig := createEndpoint(t, s, fullEndpoint(), at(0))
	rotated, err := s.EndpointRotateSecret(t.Context(), &store.EndpointRotateSecretParams{
		ID: orig.ID, NewSecret: "whsec_second", PreviousValidFor: 24 * time.Hour, Now: at(time.Second),
	})
	require.NoError(t, err)

	upd := &herald.Endpoint{
		ID:                orig.ID,
		ConsumerID:        "someone_else",
		URL:               "https://new.example.com/in",
		Description:       "renamed",
		EventTypes:        []string{"invoice.*"},
		Secret:            "whsec_not_taken",
		Enabled:           false,
		DisabledReason:    "not taken",
		Timeout:           3 * time.Second,
		RetrySchedule:     []time.Duration{0, time.Minute},
		RetryClientErrors: false,
		MaxInFlight:       2,
		SignatureScheme:   herald.SchemeStandard,
		Headers:           map[string]string{"X-New": "1"},
		Ordering:          herald.OrderingNone,
		AutoDisableAfter:  time.Hour,
		Health:            herald.EndpointHealth{BreakerState: herald.BreakerOpen, ConsecutiveFailures: 4},
		CreatedAt:         at(99 * time.Hour),
	}
	got, err := s.EndpointUpdate(t.Context(), &store.EndpointUpdateParams{Endpoint: upd, Now: at(time.Minute)})
	require.NoError(t, err)

	want := &herald.Endpoint{
		ID:                      orig.ID,
		ConsumerID:              orig.ConsumerID,
		URL:                     upd.URL,
		Description:             upd.Description,
		EventTypes:              upd.EventTypes,
		Secret:                  "whsec_second",
		PreviousSecret:          orig.Secret,
		PreviousSecretExpiresAt: rotated.PreviousSecretExpiresAt,
		Enabled:                 true,
		Timeout:                 upd.Timeout,
		RetrySchedule:           upd.RetrySchedule,
		RetryExponential:        nil,
		RetryClientErrors:       false,
		RateLimit:               nil,
		MaxInFlight:             upd.MaxInFlight,
		SignatureScheme:         upd.SignatureScheme,
		Headers:                 upd.Headers,
		Ordering:                herald.OrderingNone,
		AutoDisableAfter:        time.Hour,
		Health:                  herald.NewEndpointHealth(),
		CreatedAt:               at(0),
		UpdatedAt:               at(time.Minute),
	}
	requireEndpoint(t, want, got)
	read, err := s.EndpointGet(t.Context(), orig.ID)
	require.NoError(t, err)
	requireEndpoint(t, want, read)

	// The new filter applies to events from now on.
	res := ingestOne(t, s, at(2*time.Minute), orig.ConsumerID, "order.created")
	require.Empty(t, res.Deliveries)
	res = ingestOne(t, s, at(2*time.Minute), orig.ConsumerID, "invoice.paid")
	require.Len(t, res.Deliveries, 1)

	upd.ID = "ep_00000000000000000000000000"
	_, err = s.EndpointUpdate(t.Context(), &store.EndpointUpdateParams{Endpoint: upd, Now: at(time.Hour)})
	expectNotFound(t, err)
}

func testEndpointDelete(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c", "order.*"), at(0))
	other := createEndpoint(t, s, newEndpoint("c2"), at(0))
	delivered := ingestFor(t, s, at(1*time.Second), ep)
	pending := ingestFor(t, s, at(2*time.Second), ep)
	delivering := ingestFor(t, s, at(3*time.Second), ep)
	dead := ingestFor(t, s, at(4*time.Second), ep)
	otherPending := ingestFor(t, s, at(5*time.Second), other)

	leases := claimAll(t, s, at(10*time.Second))
	require.Len(t, leases, 5)
	finish(t, s, at(11*time.Second), leases[delivered], herald.StatusDelivered)
	finish(t, s, at(11*time.Second), leases[dead], herald.StatusDead)
	require.NoError(t, s.DeliveryRelease(t.Context(), &store.DeliveryReleaseParams{
		Leases: []store.Lease{
			{DeliveryID: pending, LeaseToken: leases[pending].LeaseToken},
			{DeliveryID: otherPending, LeaseToken: leases[otherPending].LeaseToken},
		},
		Now: at(11 * time.Second),
	}))

	require.NoError(t, s.EndpointDelete(t.Context(), &store.EndpointDeleteParams{ID: ep.ID, Now: at(time.Minute)}))

	_, err := s.EndpointGet(t.Context(), ep.ID)
	expectNotFound(t, err)
	page, err := s.EndpointList(t.Context(), &store.EndpointListParams{ConsumerID: "c"})
	require.NoError(t, err)
	require.Empty(t, page.Items)
	page, err = s.EndpointList(t.Context(), &store.EndpointListParams{})
	require.NoError(t, err)
	require.Equal(t, []string{other.ID}, endpointIDs(page.Items))

	requireStatus(t, s, pending, herald.StatusCancelled)
	requireStatus(t, s, delivering, herald.StatusCancelled)
	requireStatus(t, s, delivered, herald.StatusDelivered)
	d := requireStatus(t, s, dead, herald.StatusDead)
	require.Equal(t, herald.DeadClientError, d.DeadReason)
	requireStatus(t, s, otherPending, herald.StatusPending)
	require.Len(t, attempts(t, s, delivered), 1, "history stays")

	dl, err := s.DeliveryList(t.Context(), &store.DeliveryListParams{EndpointID: ep.ID})
	require.NoError(t, err)
	require.Len(t, dl.Items, 4, "its deliveries are still listed")

	// The attempt in flight finds its lease gone.
	require.Equal(t, []bool{false}, complete(t, s, at(2*time.Minute), outcome(leases[delivering], herald.StatusDelivered, at(time.Minute))))
	requireStatus(t, s, delivering, herald.StatusCancelled)

	// Nothing new reaches it, and its deliveries cannot come back.
	res := ingestOne(t, s, at(3*time.Minute), "c", "order.created")
	require.Empty(t, res.Deliveries)
	_, err = s.DeliveryReplay(t.Context(), &store.DeliveryReplayParams{ID: dead, Now: at(4 * time.Minute)})
	expectConflict(t, err)
	n, err := s.DeliveryReplayMany(t.Context(), &store.DeliveryReplayManyParams{EndpointID: ep.ID, Now: at(4 * time.Minute)})
	require.NoError(t, err)
	require.Zero(t, n)
	claimOne(t, s, at(5*time.Minute), otherPending)

	err = s.EndpointDelete(t.Context(), &store.EndpointDeleteParams{ID: ep.ID, Now: at(time.Hour)})
	expectNotFound(t, err)
	_, err = s.EndpointSetEnabled(t.Context(), &store.EndpointSetEnabledParams{ID: ep.ID, Enabled: true, Now: at(time.Hour)})
	expectNotFound(t, err)
	upd := newEndpoint("c")
	upd.ID = ep.ID
	_, err = s.EndpointUpdate(t.Context(), &store.EndpointUpdateParams{Endpoint: upd, Now: at(time.Hour)})
	expectNotFound(t, err)
	_, err = s.EndpointRotateSecret(t.Context(), &store.EndpointRotateSecretParams{ID: ep.ID, NewSecret: "whsec_y", Now: at(time.Hour)})
	expectNotFound(t, err)
	err = s.EndpointDelete(t.Context(), &store.EndpointDeleteParams{ID: "ep_00000000000000000000000000", Now: at(time.Hour)})
	expectNotFound(t, err)
}

func testEndpointDisable(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c"), at(0))
	other := createEndpoint(t, s, newEndpoint("c2"), at(0))
	delivered := ingestFor(t, s, at(1*time.Second), ep)
	delivering := ingestFor(t, s, at(2*time.Second), ep)
	leases := claimAll(t, s, at(3*time.Second))
	require.Len(t, leases, 2)
	finish(t, s, at(4*time.Second), leases[delivered], herald.StatusDelivered)
	pending := ingestFor(t, s, at(5*time.Second), ep)
	otherPending := ingestFor(t, s, at(5*time.Second), other)

	got, err := s.EndpointSetEnabled(t.Context(), &store.EndpointSetEnabledParams{
		ID: ep.ID, Enabled: false, Reason: "too many failures", Now: at(time.Minute),
	})
	require.NoError(t, err)
	require.False(t, got.Enabled)
	require.Equal(t, "too many failures", got.DisabledReason)
	requireTime(t, at(time.Minute), got.UpdatedAt)
	read, err := s.EndpointGet(t.Context(), ep.ID)
	require.NoError(t, err)
	requireEndpoint(t, got, read)

	for _, id := range []string{pending, delivering} {
		d := requireStatus(t, s, id, herald.StatusDead)
		require.Equal(t, herald.DeadEndpointDisabled, d.DeadReason)
		require.Nil(t, d.NextAttemptAt)
	}
	requireStatus(t, s, delivered, herald.StatusDelivered)
	requireStatus(t, s, otherPending, herald.StatusPending)

	// The attempt in flight finds its lease gone; nothing of it is claimed.
	require.Equal(t, []bool{false}, complete(t, s, at(2*time.Minute), outcome(leases[delivering], herald.StatusDelivered, at(time.Minute))))
	requireStatus(t, s, delivering, herald.StatusDead)
	claimOne(t, s, at(time.Hour), otherPending)

	// New events do not fan out to it.
	res := ingestOne(t, s, at(2*time.Hour), "c", "order.created")
	require.Empty(t, res.Deliveries)

	_, err = s.EndpointSetEnabled(t.Context(), &store.EndpointSetEnabledParams{ID: "ep_00000000000000000000000000", Now: at(time.Hour)})
	expectNotFound(t, err)
}

func testEndpointEnable(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c"), at(0))
	pending := ingestFor(t, s, at(time.Second), ep)
	disableEndpoint(t, s, ep.ID, at(time.Minute))

	_, err := s.DeliveryReplay(t.Context(), &store.DeliveryReplayParams{ID: pending, Now: at(2 * time.Minute)})
	expectConflict(t, err)

	got, err := s.EndpointSetEnabled(t.Context(), &store.EndpointSetEnabledParams{ID: ep.ID, Enabled: true, Now: at(time.Hour)})
	require.NoError(t, err)
	require.True(t, got.Enabled)
	require.Empty(t, got.DisabledReason)
	requireTime(t, at(time.Hour), got.UpdatedAt)

	// Enabling does not revive what went dead; a replay does.
	requireStatus(t, s, pending, herald.StatusDead)
	requireNoneDue(t, s, at(2*time.Hour))
	_, err = s.DeliveryReplay(t.Context(), &store.DeliveryReplayParams{ID: pending, Now: at(2 * time.Hour)})
	require.NoError(t, err)
	claimOne(t, s, at(2*time.Hour), pending)

	res := ingestOne(t, s, at(3*time.Hour), "c", "order.created")
	require.Len(t, res.Deliveries, 1, "an enabled endpoint receives new events again")
}

func testEndpointRotate(t *testing.T, s store.Store) {
	ep := createEndpoint(t, s, newEndpoint("c"), at(0))
	first := ep.Secret

	got, err := s.EndpointRotateSecret(t.Context(), &store.EndpointRotateSecretParams{
		ID: ep.ID, NewSecret: "whsec_second", PreviousValidFor: 24 * time.Hour, Now: at(time.Hour),
	})
	require.NoError(t, err)
	require.Equal(t, "whsec_second", got.Secret)
	require.Equal(t, first, got.PreviousSecret)
	requireTimePtr(t, at(25*time.Hour), got.PreviousSecretExpiresAt)
	read, err := s.EndpointGet(t.Context(), ep.ID)
	require.NoError(t, err)
	requireEndpoint(t, got, read)
	require.Equal(t, ep.URL, read.URL, "settings stay")
	require.True(t, read.Enabled)

	// A claim hands the sender both secrets.
	d := ingestFor(t, s, at(2*time.Hour), ep)
	c := claimOne(t, s, at(2*time.Hour), d)
	require.Equal(t, "whsec_second", c.Endpoint.Secret)
	require.Equal(t, first, c.Endpoint.PreviousSecret)
	requireTimePtr(t, at(25*time.Hour), c.Endpoint.PreviousSecretExpiresAt)

	got, err = s.EndpointRotateSecret(t.Context(), &store.EndpointRotateSecretParams{
		ID: ep.ID, NewSecret: "whsec_third", PreviousValidFor: time.Hour, Now: at(3 * time.Hour),
	})
	require.NoError(t, err)
	require.Equal(t, "whsec_third", got.Secret)
	require.Equal(t, "whsec_second", got.PreviousSecret)
	requireTimePtr(t, at(4*time.Hour), got.PreviousSecretExpiresAt)

	_, err = s.EndpointRotateSecret(t.Context(), &store.EndpointRotateSecretParams{ID: "ep_00000000000000000000000000", NewSecret: "x", Now: at(time.Hour)})
	expectNotFound(t, err)
}
