package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// scanEndpoint reads one endpoint from a query returning endpointCols,
// its secrets opened.
func (s *Store) scanEndpoint(row pgx.Row) (*herald.Endpoint, error) {
	var r endpointRow
	if err := row.Scan(r.dest()...); err != nil {
		return nil, err
	}
	ep, err := r.endpoint()
	if err != nil {
		return nil, err
	}
	if err := s.secrets.OpenEndpoint(ep, r.sealed); err != nil {
		return nil, err
	}
	return ep, nil
}

// EndpointCreate stores a new endpoint, making its id when it has none.
// CreatedAt and UpdatedAt come from p.Now or the database clock. Its health
// is Herald's to keep: a new endpoint starts healthy
// (herald.NewEndpointHealth), whatever e.Health says. An id already taken
// gives store.ErrConflict.
func (s *Store) EndpointCreate(ctx context.Context, p *store.EndpointCreateParams) (*herald.Endpoint, error) {
	e := p.Endpoint
	id := e.ID
	if id == "" {
		id = herald.NewID(herald.PrefixEndpoint, idTime(p.Now))
	}
	a, err := newEndpointArgs(e)
	if err != nil {
		return nil, fmt.Errorf("create endpoint: %w", err)
	}
	secret, sealed, err := s.secrets.Seal(id, e.Secret)
	if err != nil {
		return nil, fmt.Errorf("create endpoint: %w", err)
	}
	previous, _, err := s.secrets.Seal(id, e.PreviousSecret)
	if err != nil {
		return nil, fmt.Errorf("create endpoint: %w", err)
	}
	clientKey, err := s.secrets.SealClientKey(id, e.ClientKey)
	if err != nil {
		return nil, fmt.Errorf("create endpoint: %w", err)
	}
	health, blocked := encodeHealth(herald.NewEndpointHealth())
	ep, err := s.scanEndpoint(s.pool.QueryRow(ctx, `
		INSERT INTO endpoints (`+endpointCols+`, blocked_until)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13::jsonb, $14,
			$15::jsonb, $16, $17, $18::jsonb,
			coalesce($19::timestamptz, now()), coalesce($19::timestamptz, now()),
			$20, $21, $22, $23::jsonb, 0, NULL, $25, $26, $27, $28, $29, $24)
		RETURNING `+endpointCols,
		id, e.ConsumerID, e.URL, e.Description, a.eventTypes, secret,
		previous, e.PreviousSecretExpiresAt, e.Enabled, e.DisabledReason,
		int64(e.Timeout), a.scheduleNS, a.exponential, e.RetryClientErrors,
		a.rateLimit, e.MaxInFlight, string(e.SignatureScheme), a.headers,
		nowArg(p.Now), string(e.Ordering), e.AutoDisableAfterFailures,
		int64(e.AutoDisableAfter), health, blocked, sealed, e.ClientCertificate, clientKey, e.Filter,
		e.NoTracePropagation))
	if isUniqueViolation(err) {
		return nil, fmt.Errorf("create endpoint %s: %w", id, store.ErrConflict)
	}
	if err != nil {
		return nil, fmt.Errorf("create endpoint: %w", err)
	}
	return ep, nil
}

// EndpointGet returns one endpoint, or store.ErrNotFound.
func (s *Store) EndpointGet(ctx context.Context, id string) (*herald.Endpoint, error) {
	ep, err := s.scanEndpoint(s.pool.QueryRow(ctx,
		"SELECT "+endpointCols+" FROM endpoints WHERE id = $1", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get endpoint %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get endpoint %s: %w", id, err)
	}
	return ep, nil
}

// EndpointList lists endpoints newest first, of one consumer or of all,
// or in the order p.Sort names, as store.ListEndpoints pages them: a
// column's (endpointListQuery), or a ranked one (ranker).
func (s *Store) EndpointList(ctx context.Context, p *store.EndpointListParams) (*store.Page[*herald.Endpoint], error) {
	return store.ListEndpoints(ctx, ranker{s}, p)
}

// queryEndpoints reads the endpoints a query returning endpointCols gives,
// in its order.
func (s *Store) queryEndpoints(ctx context.Context, q string, args ...any) ([]*herald.Endpoint, error) {
	rows, err := s.pool.Query(ctx, q, args...)
	return collect(rows, err, s.scanEndpoint)
}

// endpointListQuery is the query of an endpoint list and its arguments:
// limit+1 endpoints of p's sort, after p's cursor. Each sort is an index's
// order: the primary key, and endpoints_consumer_sort_idx, endpoints_url_idx
// or endpoints_consumer_url_idx (0013_endpoint_figures.sql), whose text
// columns sort in byte order (COLLATE "C"), as SQLite's do.
func endpointListQuery(p *store.EndpointListParams, limit int) (string, []any, error) {
	if !p.Sort.Valid() || p.Sort.Ranked() {
		return "", nil, fmt.Errorf("unknown sort %q", p.Sort)
	}
	key, desc := p.Sort.Key()
	// col is the sort's first column; "created" is the id's order.
	col := map[string]string{"created": "", "consumer": `consumer_id COLLATE "C"`, "url": `url COLLATE "C"`}[key]
	cmp, dir := ">", "ASC"
	if desc {
		cmp, dir = "<", "DESC"
	}
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if p.ConsumerID != "" {
		where = append(where, "consumer_id = "+arg(p.ConsumerID))
	}
	order := "id " + dir
	if col != "" {
		order = col + " " + dir + `, id COLLATE "C" ` + dir
	}
	if p.Cursor != "" {
		if col == "" {
			where = append(where, "id "+cmp+" "+arg(p.Cursor))
		} else {
			k, id, ok := store.ParseSortCursor(p.Cursor)
			if !ok {
				return "", nil, store.ErrInvalidCursor
			}
			where = append(where, "("+col+`, id COLLATE "C") `+cmp+" ("+arg(k)+", "+arg(id)+")")
		}
	}
	q := "SELECT " + endpointCols + " FROM endpoints" + whereClause(where) + " ORDER BY " + order + " LIMIT " + arg(limit+1)
	return q, args, nil
}

// whereClause joins conditions with AND, or gives "" when there are none.
func whereClause(conds []string) string {
	if len(conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(conds, " AND ")
}

// EndpointUpdate replaces the endpoint's delivery settings: url,
// description, event types, timeout, retry policy, rate limit, in-flight
// cap, signature scheme, headers, ordering, auto-disable thresholds and
// client certificate (with its key, sealed anew). Its id, consumer,
// secrets (current and previous), enabled state and reason, health and
// created_at stay.
func (s *Store) EndpointUpdate(ctx context.Context, p *store.EndpointUpdateParams) (*herald.Endpoint, error) {
	e := p.Endpoint
	a, err := newEndpointArgs(e)
	if err != nil {
		return nil, fmt.Errorf("update endpoint %s: %w", e.ID, err)
	}
	clientKey, err := s.secrets.SealClientKey(e.ID, e.ClientKey)
	if err != nil {
		return nil, fmt.Errorf("update endpoint %s: %w", e.ID, err)
	}
	// Gate and FOR UPDATE first (gate.go): an ingest leasing to the
	// endpoint decided on its settings (the cap, FIFO, the rate limit) as
	// they were; the change waits for it, and a later one reads them anew.
	var ep *herald.Endpoint
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, gateEndpointsSQL, []string{e.ID}); err != nil {
			return err
		}
		var err error
		ep, err = s.scanEndpoint(tx.QueryRow(ctx, `
		UPDATE endpoints SET
			url = $2, description = $3, event_types = $4, timeout_ns = $5,
			retry_schedule_ns = $6, retry_exponential = $7::jsonb, retry_client_errors = $8,
			rate_limit = $9::jsonb, max_in_flight = $10, signature_scheme = $11,
			headers = $12::jsonb, updated_at = coalesce($13::timestamptz, now()),
			ordering = $14, auto_disable_after_failures = $15, auto_disable_after_ns = $16,
			client_certificate = $17, client_key = $18, filter = $19, no_trace_propagation = $20
		WHERE id = (SELECT id FROM endpoints WHERE id = $1 FOR UPDATE)
		RETURNING `+endpointCols,
			e.ID, e.URL, e.Description, a.eventTypes, int64(e.Timeout),
			a.scheduleNS, a.exponential, e.RetryClientErrors,
			a.rateLimit, e.MaxInFlight, string(e.SignatureScheme),
			a.headers, nowArg(p.Now), string(e.Ordering), e.AutoDisableAfterFailures,
			int64(e.AutoDisableAfter), e.ClientCertificate, clientKey, e.Filter, e.NoTracePropagation))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("update endpoint %s: %w", e.ID, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("update endpoint %s: %w", e.ID, err)
	}
	return ep, nil
}

// cancelEndpointSQL cancels the live deliveries of the deleted endpoint
// $1, found by delivery_queue's claim index rather than among its history.
const cancelEndpointSQL = `
UPDATE deliveries
SET status = 'cancelled', due_at = NULL, updated_at = coalesce($2::timestamptz, now())
WHERE id IN (SELECT delivery_id FROM delivery_queue WHERE endpoint_id = $1
		UNION ALL ` + liveAmongHistorySQL + `)
	AND status IN ('pending', 'delivering')`

// disableEndpointSQL sends the live deliveries of the disabled endpoint $1
// dead, all but $2 (an outcome's own, written by its caller), found by
// delivery_queue's claim index rather than among its history.
const disableEndpointSQL = `
UPDATE deliveries
SET status = 'dead', dead_reason = 'endpoint_disabled', due_at = NULL,
	updated_at = coalesce($3::timestamptz, now())
WHERE id IN (SELECT delivery_id FROM delivery_queue WHERE endpoint_id = $1 AND delivery_id <> $2
		UNION ALL ` + liveAmongHistorySQL + ` AND id <> $2)
	AND status IN ('pending', 'delivering')`

// liveAmongHistorySQL is the way to an endpoint $1's live deliveries when
// the delivery queue is not built (migrations 0032, 0033): its history, through
// deliveries_endpoint_idx. Otherwise it reads nothing.
const liveAmongHistorySQL = `SELECT id FROM deliveries
		WHERE endpoint_id = $1 AND NOT ` + queueBuiltSQL

// EndpointDelete removes the endpoint and cancels its live deliveries in
// one transaction; its deliveries and attempts stay as history.
func (s *Store) EndpointDelete(ctx context.Context, p *store.EndpointDeleteParams) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		// The endpoint's gate and row go first: every writer that
		// touches an endpoint and its deliveries locks them in that order.
		if _, err := tx.Exec(ctx, gateEndpointsSQL, []string{p.ID}); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, "DELETE FROM endpoints WHERE id = $1", p.ID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return store.ErrNotFound
		}
		_, err = tx.Exec(ctx, cancelEndpointSQL, p.ID, nowArg(p.Now))
		return err
	})
	if err != nil {
		return fmt.Errorf("delete endpoint %s: %w", p.ID, err)
	}
	return nil
}

// EndpointSetEnabled enables or disables an endpoint. Disabling sends its
// live deliveries dead (endpoint_disabled) in the same transaction;
// enabling starts its health afresh (closed breaker, no streak, no pause,
// a full token bucket) and wakes the dispatchers.
func (s *Store) EndpointSetEnabled(ctx context.Context, p *store.EndpointSetEnabledParams) (*herald.Endpoint, error) {
	var ep *herald.Endpoint
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		if p.Enabled {
			health, blocked := encodeHealth(herald.NewEndpointHealth())
			ep, err = s.scanEndpoint(tx.QueryRow(ctx, `
				UPDATE endpoints
				SET enabled = true, disabled_reason = '', updated_at = coalesce($2::timestamptz, now()),
					health = $3::jsonb, blocked_until = $4, bucket_tokens = 0, bucket_at = NULL
				WHERE id = $1
				RETURNING `+endpointCols,
				p.ID, nowArg(p.Now), health, blocked))
			if err != nil {
				return err
			}
			return s.notify(ctx, tx)
		}
		ep, err = s.disableEndpoint(ctx, tx, p.ID, p.Reason, "", p.Now)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("set endpoint %s enabled=%t: %w", p.ID, p.Enabled, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("set endpoint %s enabled=%t: %w", p.ID, p.Enabled, err)
	}
	return ep, nil
}

// disableEndpoint disables the endpoint with reason and sends its live
// deliveries, except the one named by keep, dead with reason
// endpoint_disabled. It locks the endpoint row before the deliveries, as
// every writer does. A missing endpoint gives pgx.ErrNoRows.
func (s *Store) disableEndpoint(ctx context.Context, tx queryer, id, reason, keep string, now time.Time) (*herald.Endpoint, error) {
	// The gate (gate.go), then FOR UPDATE, not the update's own lock: an
	// outcome write of plain successes holds its endpoints FOR KEY SHARE
	// while it writes their deliveries (plainSuccessSQL), and a leasing
	// ingest while it leases to them; each must be done before this one
	// sends them dead, or wait for it.
	if _, err := tx.Exec(ctx, gateEndpointsSQL, []string{id}); err != nil {
		return nil, err
	}
	ep, err := s.scanEndpoint(tx.QueryRow(ctx, `
		UPDATE endpoints
		SET enabled = false, disabled_reason = $2, updated_at = coalesce($3::timestamptz, now())
		WHERE id = (SELECT id FROM endpoints WHERE id = $1 FOR UPDATE)
		RETURNING `+endpointCols,
		id, reason, nowArg(now)))
	if err != nil {
		return nil, err
	}
	// A statement of its own, so it sees deliveries replayed by
	// transactions that committed while this one waited for the endpoint.
	_, err = tx.Exec(ctx, disableEndpointSQL, id, keep, nowArg(now))
	if err != nil {
		return nil, err
	}
	return ep, nil
}

// EndpointRotateSecret makes NewSecret the signing secret; the old one
// keeps signing until PreviousValidFor after now. With no overlap asked
// for, the old secret stops at once. Both are stored sealed: an old secret
// still plain (from before encryption) is sealed as it moves.
func (s *Store) EndpointRotateSecret(ctx context.Context, p *store.EndpointRotateSecretParams) (*herald.Endpoint, error) {
	var ep *herald.Endpoint
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		// The row stays locked until commit: the old secret read here is
		// the one replaced, whatever other nodes do meanwhile.
		var old string
		var oldSealed bool
		if _, err := tx.Exec(ctx, gateEndpointsSQL, []string{p.ID}); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT secret, secrets_encrypted FROM endpoints WHERE id = $1 FOR UPDATE`,
			p.ID).Scan(&old, &oldSealed); err != nil {
			return err
		}
		secret, previous, sealed, err := s.secrets.Rotate(p.ID, p.NewSecret, old, oldSealed)
		if err != nil {
			return err
		}
		ep, err = s.scanEndpoint(tx.QueryRow(ctx, `
			UPDATE endpoints SET
				previous_secret = CASE WHEN $3::bigint > 0 THEN $5 ELSE '' END,
				previous_secret_expires_at = CASE WHEN $3::bigint > 0
					THEN coalesce($4::timestamptz, now()) + $3::bigint * interval '1 microsecond' END,
				secret = $2,
				secrets_encrypted = $6,
				updated_at = coalesce($4::timestamptz, now())
			WHERE id = $1
			RETURNING `+endpointCols,
			p.ID, secret, micros(p.PreviousValidFor), nowArg(p.Now), previous, sealed))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("rotate secret of endpoint %s: %w", p.ID, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("rotate secret of endpoint %s: %w", p.ID, err)
	}
	return ep, nil
}
