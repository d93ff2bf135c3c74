package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/breaker"
	"github.com/heraldhooks/herald/internal/store"
)

// lockOutcomeEndpointsSQL locks the endpoints of the deliveries in $1, in
// id order, once their gates are held (gateOutcomeEndpointsSQL, gate.go):
// every writer locks endpoints before deliveries, and several endpoints in
// id order, so writers cannot deadlock. The last column is the batch's
// now.
var lockOutcomeEndpointsSQL = `
SELECT ` + endpointCols + `, coalesce($2::timestamptz, now())
FROM endpoints
WHERE id IN (SELECT endpoint_id FROM deliveries WHERE id = ANY($1::text[]))
ORDER BY id
FOR UPDATE`

// completeSQL records a wave of outcomes (no delivery twice): every
// attempt, numbered after the attempts the delivery had counted when it
// has no number, and the new state of each delivery still delivering under
// the outcome's lease token. It returns, in the order given, whether each
// outcome applied, the delivery's endpoint, event and consumer, and its
// attempt count after the outcome.
const completeSQL = completeWritesSQL + `
SELECT upd.id IS NOT NULL, coalesce(cur.endpoint_id, ''), coalesce(cur.event_id, ''),
	coalesce(cur.event_type, ''), coalesce(cur.consumer_id, ''), coalesce(upd.attempt_count, 0)
FROM o
LEFT JOIN cur ON cur.id = o.id
LEFT JOIN upd ON upd.id = o.id
ORDER BY o.ord`

// completeWritesSQL is what completeSQL and completePlainSQL write: the
// outcomes (o), the deliveries as they were (cur), their updates under
// the outcomes' leases (upd) and the attempts (att).
const completeWritesSQL = `
WITH o AS (
	SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::text[],
		$6::text[], $7::int[], $8::int[], $9::bigint[], $10::bytea[], $11::text[],
		$12::timestamptz[])
		WITH ORDINALITY AS o(id, token, status, retry_us, dead_reason, attempt_id,
			number, status_code, duration_ns, response, error, attempted_at, ord)
), cur AS (
	SELECT d.id, d.endpoint_id, d.event_id, d.event_type, d.consumer_id, d.attempt_count
	FROM deliveries d
	WHERE d.id IN (SELECT id FROM o)
), upd AS (
	UPDATE deliveries d SET
		status = o.status,
		attempt_count = d.attempt_count + 1,
		due_at = CASE WHEN o.status = 'pending'
			THEN coalesce($13::timestamptz, now()) + o.retry_us * interval '1 microsecond' END,
		last_status_code = o.status_code,
		last_error = o.error,
		dead_reason = CASE WHEN o.status = 'dead' THEN o.dead_reason ELSE '' END,
		delivered_at = CASE WHEN o.status = 'delivered'
			THEN coalesce($13::timestamptz, now()) ELSE d.delivered_at END,
		updated_at = coalesce($13::timestamptz, now())
	FROM o
	WHERE d.id = o.id AND d.status = 'delivering' AND d.lease_token = o.token
	RETURNING d.id, d.attempt_count
), att AS (
	INSERT INTO attempts (id, delivery_id, endpoint_id, number, attempted_at,
		duration_ns, status_code, response, error)
	SELECT o.attempt_id, cur.id, cur.endpoint_id,
		CASE WHEN o.number > 0 THEN o.number ELSE cur.attempt_count + 1 END,
		coalesce(o.attempted_at, $13::timestamptz, now()), o.duration_ns, o.status_code,
		o.response, o.error
	FROM o JOIN cur ON cur.id = o.id
)`

// completePlainSQL is completeSQL for a wave of plain successes
// (completePlain): it deletes the delivery queue's rows of the deliveries
// it ends itself (the triggers on updates of deliveries do not run: see
// plainSuccessSQL), and fails with outcomesNotPlain, which rolls the
// write back, if an outcome's lease no longer holds. It returns nothing
// else: every outcome applied.
const completePlainSQL = completeWritesSQL + `, gone AS (
	DELETE FROM delivery_queue q USING upd WHERE q.delivery_id = upd.id
)
SELECT count(herald_outcomes_not_plain('the lease of ' || o.id || ' no longer holds'))
FROM o
WHERE NOT EXISTS (SELECT 1 FROM upd WHERE upd.id = o.id)`

// outcomesNotPlain is the SQLSTATE of herald_outcomes_not_plain
// (migration 0023).
const outcomesNotPlain = "HE002"

// isOutcomesNotPlain says whether err is herald_outcomes_not_plain's.
func isOutcomesNotPlain(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == outcomesNotPlain
}

// windowSQL counts, for the endpoints of the deliveries in $1, the
// attempts over the breaker's window [now - $3 µs, now] and the failed ones
// among them (any status code but 2xx). Only the decision matters, so the
// attempts are counted no further than it needs: with F failures, once
// there are more than F/ratio + 1 attempts ($4 the ratio) the ratio cannot
// be reached, and no fewer than $5 (the minimum attempts) are counted. A
// healthy endpoint's window thus costs about its failures to count, not
// its traffic; the breaker decides on the counts as given.
const windowSQL = `
SELECT w.endpoint_id, f.n, a.n
FROM (SELECT DISTINCT endpoint_id FROM deliveries WHERE id = ANY($1::text[])) AS w
CROSS JOIN LATERAL (
	SELECT count(*) AS n FROM attempts x
	WHERE x.endpoint_id = w.endpoint_id AND x.status_code NOT BETWEEN 200 AND 299
		AND x.attempted_at >= coalesce($2::timestamptz, now()) - $3::bigint * interval '1 microsecond'
		AND x.attempted_at <= coalesce($2::timestamptz, now())
) AS f
CROSS JOIN LATERAL (
	SELECT count(*) AS n FROM (
		SELECT 1 FROM attempts x
		WHERE x.endpoint_id = w.endpoint_id
			AND x.attempted_at >= coalesce($2::timestamptz, now()) - $3::bigint * interval '1 microsecond'
			AND x.attempted_at <= coalesce($2::timestamptz, now())
		LIMIT CASE WHEN $4::float8 > 0
			THEN greatest($5::bigint, floor(f.n / $4::float8)::bigint + 2) ELSE $5::bigint END
	) AS counted
) AS a`

// writeHealthSQL stores endpoints' health and the blocked_until it implies.
const writeHealthSQL = `
UPDATE endpoints e SET health = u.health::jsonb, blocked_until = u.blocked_until
FROM unnest($1::text[], $2::text[], $3::timestamptz[]) AS u(id, health, blocked_until)
WHERE e.id = u.id`

// appliedOutcome is what completeSQL says of one outcome.
type appliedOutcome struct {
	applied      bool
	endpointID   string
	eventID      string
	eventType    string
	consumerID   string
	attemptCount int32
}

// DeliveryCompleteMany writes a batch of outcomes in one transaction, as
// store.Store describes. The common case takes two round trips, the
// transaction's BEGIN and COMMIT included (completeTx): one pgx batch locks
// the endpoints, records every outcome (one statement per wave, a wave
// holding each delivery once) and counts the breaker windows, then one
// writes the endpoints' health and the activity and commits. Every outcome's attempt is logged; an outcome applies only while
// its lease holds, and a stale one is reported as not applied rather than
// as an error (invariant 10) and touches no health.
//
// The applied outcomes then go through the breaker in the order given.
// Once an outcome disables its endpoint, the endpoint's later outcomes in
// the batch are not observed: a disabled endpoint's health starts afresh
// when it is enabled again. Disabling sends the endpoint's live deliveries
// dead (endpoint_disabled), including one an outcome has just put back to
// pending. The notifications are ingested last, so an endpoint disabled in
// this batch is not sent its own.
func (s *Store) DeliveryCompleteMany(ctx context.Context, p *store.DeliveryCompleteManyParams) ([]bool, error) {
	applied := make([]bool, len(p.Outcomes))
	if len(p.Outcomes) == 0 {
		return applied, nil
	}
	if err := store.CheckOutcomes(p.Outcomes); err != nil {
		return nil, fmt.Errorf("complete deliveries: %w", err)
	}
	ids := make([]string, len(p.Outcomes))
	var failing []string
	for i := range p.Outcomes {
		o := &p.Outcomes[i]
		ids[i] = o.DeliveryID
		if o.Status != herald.StatusDelivered {
			failing = append(failing, o.DeliveryID)
		}
	}
	waves := outcomeWaves(p.Outcomes)
	if plainSuccesses(p.Outcomes) {
		done, err := s.completePlain(ctx, p, ids, waves, applied)
		if err != nil {
			return nil, fmt.Errorf("complete deliveries: %w", err)
		}
		if done {
			return applied, nil
		}
	}
	cfg := breaker.Default()

	batch := &pgx.Batch{}
	batch.Queue(gateOutcomeEndpointsSQL, ids)
	batch.Queue(lockOutcomeEndpointsSQL, ids, nowArg(p.Now))
	for _, w := range waves {
		batch.Queue(completeSQL, outcomeArgs(p, w)...)
	}
	if len(failing) > 0 {
		batch.Queue(windowSQL, failing, nowArg(p.Now), micros(cfg.Window),
			cfg.WindowRatio, int64(cfg.WindowMinAttempts))
	}

	emitted, err := s.completeTx(ctx, p, cfg, batch, waves, failing, applied)
	if err != nil {
		return nil, fmt.Errorf("complete deliveries: %w", err)
	}
	if p.Notify != nil {
		for _, n := range emitted {
			p.Notify(n)
		}
	}
	return applied, nil
}

// completeTx runs an outcome write in a batchTx, in two round trips: its
// BEGIN goes with batch (the endpoints' gates taken and the endpoints
// locked, the outcomes recorded, the
// breaker windows counted), and its COMMIT with what the answers decide
// (the endpoints' health, the wake-up for a retry due soon, the activity),
// unless an endpoint is disabled or a notification ingested, which read
// what they write. It fills applied and returns the notifications
// emitted.
func (s *Store) completeTx(ctx context.Context, p *store.DeliveryCompleteManyParams, cfg breaker.Config,
	batch *pgx.Batch, waves [][]int, failing []string, applied []bool,
) ([]herald.Notification, error) {
	tx, err := s.beginBatched(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.end(ctx)
	results := tx.SendBatch(ctx, batch)
	if _, err := results.Exec(); err != nil { // gateOutcomeEndpointsSQL
		_ = results.Close()
		return nil, fmt.Errorf("lock endpoints: %w", err)
	}
	endpoints, now, err := readLockedEndpoints(results)
	if err != nil {
		_ = results.Close()
		return nil, fmt.Errorf("lock endpoints: %w", err)
	}
	outcomes := make([]appliedOutcome, len(p.Outcomes))
	for _, w := range waves {
		if err := readWave(results, w, outcomes); err != nil {
			_ = results.Close()
			return nil, fmt.Errorf("record outcomes: %w", err)
		}
	}
	windows := map[string]breaker.Window{}
	if len(failing) > 0 {
		if windows, err = readWindows(results); err != nil {
			_ = results.Close()
			return nil, fmt.Errorf("count breaker window: %w", err)
		}
	}
	if err := results.Close(); err != nil {
		return nil, err
	}
	later := &pgx.Batch{}
	for i := range outcomes {
		applied[i] = outcomes[i].applied
	}
	if store.RetriesSoon(p.Outcomes, applied) {
		// Idle nodes learn of a retry due within the second at once.
		later.Queue(notifySQL, s.channel)
	}
	emitted, err := s.observe(ctx, tx, later, p, cfg, outcomes, endpoints, windows, now)
	if err != nil {
		return nil, err
	}
	at := now
	if at.IsZero() { // no endpoint was locked: none of the deliveries is left
		at = idTime(p.Now)
	}
	s.queueOutcomeActivity(later, p, applied, at)
	if err := tx.commit(ctx, later); err != nil {
		return nil, err
	}
	return emitted, nil
}

// plainHealthSQL is true for an endpoint whose health a success leaves as
// it is but for last_success_at (breaker.Plain): its breaker closed, no
// failure counted, not slowed down. encodeHealth leaves out what is zero; a
// key present with a null value counts as not plain, whose fallback (the
// breaker's path) writes the health anew.
const plainHealthSQL = `coalesce(coalesce(e.health->>'breaker_state', 'closed') = 'closed'
	AND coalesce((e.health->>'rate_factor')::float8, 1) >= 1
	AND NOT e.health ?| array['consecutive_failures', 'failing_since', 'failing_notified',
		'probe_at', 'cooldown_ns'], false)`

// plainSuccessSQL is the health write of a batch of plain successes
// (plainSuccesses), sent before the outcomes it goes with. It holds the
// endpoints of the deliveries still leased under the outcomes' tokens ($1,
// $2) FOR KEY SHARE, in id order: ingests leasing to them (FOR KEY SHARE)
// and claims (FOR NO KEY UPDATE) go on, but the writers that decide on an
// endpoint's health, settings or state or send its live deliveries dead
// (the breaker's path, changes, disabling and deleting: the gate, then
// FOR UPDATE) wait for this transaction, or this one for them, before any
// delivery is touched; and
// whether an endpoint is plain is read on the row as locked, after any
// such writer committed. The plain ones whose last_success_at is older
// than store.LastSuccessPrecision get the batch's now ($3 or the database
// clock), never an earlier time than they hold, unless a claim holds the
// row (or a leasing ingest waits for one): then the write is left to a later
// success rather than wait for them (free). If an endpoint is not
// plain, it fails with outcomesNotPlain: its outcomes must go through the
// breaker (completeTx). It sets herald.claim_queues for the transaction:
// its outcomes (completePlainSQL) keep the delivery queue themselves, as
// a claim does (migrations 0021 and 0023). (upd runs whether or not it is
// read, as every data-modifying WITH does.)
var plainSuccessSQL = `
WITH n AS (
	SELECT coalesce($3::timestamptz, now()) AS t
), l AS (
	SELECT DISTINCT d.endpoint_id AS id
	FROM unnest($1::text[], $2::bigint[]) AS o(id, token)
	JOIN deliveries d ON d.id = o.id AND d.status = 'delivering' AND d.lease_token = o.token
), held AS (
	SELECT e.id, ` + plainHealthSQL + ` AS plain,
		(e.health->>'last_success_at' IS NULL
			OR herald_health_time(e.health->>'last_success_at') <= n.t - $4::bigint * interval '1 microsecond') AS due
	FROM endpoints e, n
	WHERE e.id IN (SELECT id FROM l)
	ORDER BY e.id
	FOR KEY SHARE OF e
), free AS (
	SELECT e.id FROM endpoints e
	WHERE e.id IN (SELECT id FROM held WHERE plain AND due)
	ORDER BY e.id
	FOR NO KEY UPDATE OF e SKIP LOCKED
), upd AS (
	UPDATE endpoints e SET health = jsonb_set(e.health, '{last_success_at}',
		to_jsonb(to_char(n.t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')))
	FROM free, n
	WHERE e.id = free.id
		AND (e.health->>'last_success_at' IS NULL
			OR herald_health_time(e.health->>'last_success_at') < n.t)
)
SELECT (SELECT count(herald_outcomes_not_plain('the health of endpoint ' || id || ' is not plain'))
		FROM held WHERE NOT plain),
	set_config('herald.claim_queues', 'on', true)`

// plainSuccessRidingSQL is plainSuccessSQL for outcomes that ride an
// ingest (rides.go): it fails at once (lock_not_available) rather than
// wait for a writer holding an endpoint FOR UPDATE (the breaker's path,
// disabling, deleting; never a claim or an ingest), and the ingest with
// it.
var plainSuccessRidingSQL = mustReplace(plainSuccessSQL, "FOR KEY SHARE OF e\n", "FOR KEY SHARE OF e NOWAIT\n")

// plainSuccesses is whether every outcome is a success that asks nothing
// of its endpoint (no pause, no slow-down, no disabling): on an endpoint
// whose health is plain, such outcomes change only its last success.
func plainSuccesses(outcomes []store.DeliveryOutcome) bool {
	for i := range outcomes {
		o := &outcomes[i]
		if o.Status != herald.StatusDelivered || o.PauseFor > 0 || o.Throttled || o.DisableEndpoint != "" {
			return false
		}
	}
	return true
}

// completePlain writes a batch of plain successes in one round trip: its
// BEGIN, the health write (plainSuccessSQL, which holds their endpoints
// only FOR KEY SHARE and writes them at most once a second), the
// outcomes, the activity and the COMMIT go out together; or, while
// ingests arrive, those statements ride the next ingest's transaction
// (rides.go). Unless one of their endpoints has a health a success
// changes, or an outcome finds its lease lost: then a statement fails
// with outcomesNotPlain, nothing is kept, and it says so (done false):
// the caller takes the breaker's path.
func (s *Store) completePlain(ctx context.Context, p *store.DeliveryCompleteManyParams, ids []string, waves [][]int, applied []bool) (bool, error) {
	carried, err := s.ride(ctx, len(p.Outcomes), func() *pgx.Batch {
		return s.plainBatch(p, ids, waves, plainSuccessRidingSQL)
	})
	if !carried || err != nil && !isOutcomesNotPlain(err) {
		// Not carried, or its ingest's transaction not surely committed:
		// alone, then.
		err = s.completePlainAlone(ctx, p, ids, waves)
	}
	switch {
	case isOutcomesNotPlain(err):
		return false, nil
	case err != nil:
		return false, err
	}
	for i := range applied {
		applied[i] = true
	}
	return true, nil
}

// completePlainAlone writes completePlain's statements in a batchTx of
// their own, one round trip.
func (s *Store) completePlainAlone(ctx context.Context, p *store.DeliveryCompleteManyParams, ids []string, waves [][]int) error {
	tx, err := s.beginBatched(ctx)
	if err != nil {
		return err
	}
	defer tx.end(ctx)
	return tx.commit(ctx, s.plainBatch(p, ids, waves, plainSuccessSQL))
}

// plainBatch queues completePlain's statements: the health write (health,
// plainSuccessSQL or plainSuccessRidingSQL), the outcomes of each wave
// and the activity (the minute the database clock's unless the caller
// gives one).
func (s *Store) plainBatch(p *store.DeliveryCompleteManyParams, ids []string, waves [][]int, health string) *pgx.Batch {
	tokens := make([]int64, len(p.Outcomes))
	all := make([]bool, len(p.Outcomes))
	for i := range p.Outcomes {
		tokens[i] = p.Outcomes[i].LeaseToken
		all[i] = true
	}
	b := &pgx.Batch{}
	b.Queue(health, ids, tokens, nowArg(p.Now), micros(store.LastSuccessPrecision))
	for _, w := range waves {
		b.Queue(completePlainSQL, outcomeArgs(p, w)...)
	}
	s.queueOutcomeActivity(b, p, all, p.Now)
	return b
}

// queueOutcomeActivity queues the activity of a batch of outcomes, one
// row write for the whole call, last in its transaction.
func (s *Store) queueOutcomeActivity(later *pgx.Batch, p *store.DeliveryCompleteManyParams, applied []bool, at time.Time) {
	s.queueActivity(later, at, store.OutcomeActivity(p.Outcomes, applied))
}

// outcomeWaves splits the outcomes' indexes into waves that hold each
// delivery at most once, keeping their order: the n-th outcome for one
// delivery goes in the n-th wave, so it sees what the ones before did.
func outcomeWaves(outcomes []store.DeliveryOutcome) [][]int {
	seen := map[string]int{}
	var waves [][]int
	for i := range outcomes {
		n := seen[outcomes[i].DeliveryID]
		seen[outcomes[i].DeliveryID] = n + 1
		if n == len(waves) {
			waves = append(waves, nil)
		}
		waves[n] = append(waves[n], i)
	}
	return waves
}

// outcomeArgs are completeSQL's parameters for the outcomes of one wave.
func outcomeArgs(p *store.DeliveryCompleteManyParams, wave []int) []any {
	n := len(wave)
	var (
		ids, statuses, reasons, attemptIDs, errs = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		tokens, retries, durations               = make([]int64, n), make([]int64, n), make([]int64, n)
		numbers, codes                           = make([]int32, n), make([]int32, n)
		responses                                = make([][]byte, n)
		attemptedAt                              = make([]*time.Time, n)
	)
	for j, i := range wave {
		o := &p.Outcomes[i]
		a := &o.Attempt
		id := a.ID
		if id == "" {
			t := a.AttemptedAt
			if t.IsZero() {
				t = idTime(p.Now)
			}
			id = herald.NewID(herald.PrefixAttempt, t)
		}
		ids[j], tokens[j], statuses[j] = o.DeliveryID, o.LeaseToken, string(o.Status)
		retries[j], reasons[j], attemptIDs[j] = micros(o.RetryIn), string(o.DeadReason), id
		numbers[j], codes[j], durations[j] = int32(a.Number), int32(a.StatusCode), int64(a.Duration)
		responses[j], errs[j] = a.Response, a.Error
		if !a.AttemptedAt.IsZero() {
			t := a.AttemptedAt
			attemptedAt[j] = &t
		}
	}
	return []any{ids, tokens, statuses, retries, reasons, attemptIDs, numbers, codes,
		durations, responses, errs, attemptedAt, nowArg(p.Now)}
}

// readLockedEndpoints reads the locked endpoints by id, and the batch's now.
func readLockedEndpoints(results pgx.BatchResults) (map[string]*herald.Endpoint, time.Time, error) {
	rows, err := results.Query()
	if err != nil {
		return nil, time.Time{}, err
	}
	defer rows.Close()
	out := map[string]*herald.Endpoint{}
	var now time.Time
	for rows.Next() {
		var r endpointRow
		if err := rows.Scan(append(r.dest(), &now)...); err != nil {
			return nil, time.Time{}, err
		}
		ep, err := r.endpoint()
		if err != nil {
			return nil, time.Time{}, err
		}
		// Outcomes need no secret: they are dropped, not opened.
		ep.Secret, ep.PreviousSecret = "", ""
		out[ep.ID] = ep
	}
	return out, now.UTC(), rows.Err()
}

// readWave reads what completeSQL says of the outcomes of one wave.
func readWave(results pgx.BatchResults, wave []int, out []appliedOutcome) error {
	rows, err := results.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	j := 0
	for rows.Next() {
		if j >= len(wave) {
			return errors.New("more answers than outcomes")
		}
		a := &out[wave[j]]
		if err := rows.Scan(&a.applied, &a.endpointID, &a.eventID, &a.eventType, &a.consumerID, &a.attemptCount); err != nil {
			return err
		}
		j++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if j != len(wave) {
		return fmt.Errorf("%d answers for %d outcomes", j, len(wave))
	}
	return nil
}

// readWindows reads the breaker windows by endpoint id.
func readWindows(results pgx.BatchResults) (map[string]breaker.Window, error) {
	rows, err := results.Query()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]breaker.Window{}
	for rows.Next() {
		var id string
		var failures, attempts int64
		if err := rows.Scan(&id, &failures, &attempts); err != nil {
			return nil, err
		}
		out[id] = breaker.Window{Attempts: int(attempts), Failures: int(failures)}
	}
	return out, rows.Err()
}

// observe puts the applied outcomes through store.OutcomeBatch, in order,
// and writes what follows: the endpoints' health, the endpoints to
// disable and the notifications, which it returns.
func (s *Store) observe(ctx context.Context, tx queryer, later *pgx.Batch, p *store.DeliveryCompleteManyParams, cfg breaker.Config,
	outcomes []appliedOutcome, endpoints map[string]*herald.Endpoint, windows map[string]breaker.Window, now time.Time,
) ([]herald.Notification, error) {
	b := store.NewOutcomeBatch(cfg, now)
	for i := range outcomes {
		a := &outcomes[i]
		ep := endpoints[a.endpointID]
		if !a.applied || ep == nil || !b.Observes(ep.ID) {
			continue // stale, its endpoint deleted, or disabled by an earlier outcome
		}
		b.Observe(ep, &p.Outcomes[i], store.DeliveryFacts{EventID: a.eventID, EventType: a.eventType,
			ConsumerID: a.consumerID, AttemptCount: int(a.attemptCount)}, windows[ep.ID])
	}
	changed, order, emitted := b.HealthWrites(), b.Disable, b.Notifications

	if len(changed) > 0 {
		ids := make([]string, len(changed))
		healths := make([]string, len(changed))
		blocked := make([]*time.Time, len(changed))
		for i, ep := range changed {
			h, until := encodeHealth(ep.Health)
			ids[i], healths[i], blocked[i] = ep.ID, string(h), until
		}
		later.Queue(writeHealthSQL, ids, healths, blocked)
	}
	if len(order) > 0 || len(emitted) > 0 {
		// What follows reads what it writes: the statements queued so
		// far go first.
		if err := sendQueued(ctx, tx, later); err != nil {
			return nil, fmt.Errorf("write health: %w", err)
		}
		*later = pgx.Batch{}
	}
	if len(order) > 0 && s.generic.BeginQuery != "" {
		// Disabling reads the endpoint's live deliveries, however many
		// there are: planned, as everywhere but in inGenericTx, for the
		// tables as they are.
		if _, err := tx.Exec(ctx, sessionPlansSQL); err != nil {
			return nil, fmt.Errorf("plan for disabling: %w", err)
		}
	}
	for _, d := range order {
		if _, err := s.disableEndpoint(ctx, tx, d.ID, d.Reason, "", p.Now); err != nil {
			return nil, fmt.Errorf("disable endpoint %s: %w", d.ID, err)
		}
	}
	if len(emitted) > 0 {
		if _, err := s.ingest(ctx, tx, store.NotificationItems(emitted), p.Now); err != nil {
			return nil, fmt.Errorf("ingest notifications: %w", err)
		}
	}
	return emitted, nil
}

// DeliveryRelease hands leases back: each delivery still delivering under
// its token becomes pending and due now, its attempt count unchanged, and
// the dispatchers of every node are woken. It holds the deliveries'
// endpoints FOR KEY SHARE, in id order, before it touches a delivery, as
// every writer of several deliveries does: a disable of one of them (FOR
// UPDATE, then its live deliveries one after another) is done before the
// release starts, or waits for it, and the two cannot each hold a delivery
// the other waits for.
func (s *Store) DeliveryRelease(ctx context.Context, p *store.DeliveryReleaseParams) error {
	if len(p.Leases) == 0 {
		return nil
	}
	ids := make([]string, len(p.Leases))
	tokens := make([]int64, len(p.Leases))
	for i, l := range p.Leases {
		ids[i], tokens[i] = l.DeliveryID, l.LeaseToken
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
			SELECT 1 FROM endpoints e
			WHERE e.id IN (SELECT d.endpoint_id FROM unnest($1::text[], $2::bigint[]) AS l(id, token)
				JOIN deliveries d ON d.id = l.id AND d.status = 'delivering' AND d.lease_token = l.token)
			ORDER BY e.id
			FOR KEY SHARE OF e`, ids, tokens); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `
			WITH released AS (
				UPDATE deliveries d SET status = 'pending', due_at = n.t, updated_at = n.t
				FROM unnest($1::text[], $2::bigint[]) AS l(id, token),
					(SELECT coalesce($3::timestamptz, now()) AS t) AS n
				WHERE d.id = l.id AND d.status = 'delivering' AND d.lease_token = l.token
				RETURNING d.id
			)
			SELECT pg_notify($4, '') WHERE EXISTS (SELECT 1 FROM released)`,
			ids, tokens, nowArg(p.Now), s.channel)
		return err
	})
	if err != nil {
		return fmt.Errorf("release deliveries: %w", err)
	}
	return nil
}
