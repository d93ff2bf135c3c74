package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// claimSQL is the statement that takes due deliveries: it locks up to $2 rows
// that are due (pending and due, or delivering with an expired lease) and
// belong to enabled endpoints, skipping rows other claimers hold, gives
// each a new lease token and a lease of twice its endpoint's timeout plus
// the margin, and returns them with their events and endpoints, oldest due
// first. An endpoint without a timeout counts the default one, the timeout
// its attempts run under.
func claimSQL() string {
	return `
WITH due AS (
	SELECT d.id, d.due_at
	FROM deliveries d
	JOIN endpoints e ON e.id = d.endpoint_id
	WHERE d.status IN ('pending', 'delivering')
		AND d.due_at <= coalesce($1::timestamptz, now())
		AND e.enabled
	ORDER BY d.due_at, d.id
	LIMIT $2
	FOR UPDATE OF d SKIP LOCKED
), claimed AS (
	UPDATE deliveries d SET
		status = 'delivering',
		lease_token = d.lease_token + 1,
		due_at = n.t + ((2 * CASE WHEN e.timeout_ns > 0 THEN e.timeout_ns ELSE $4::bigint END
			+ $3::bigint) / 1000) * interval '1 microsecond',
		updated_at = n.t
	FROM due, endpoints e, (SELECT coalesce($1::timestamptz, now()) AS t) AS n
	WHERE d.id = due.id AND e.id = d.endpoint_id
	RETURNING ` + qualify("d", deliveryCols) + `
)
SELECT ` + qualify("c", deliveryCols) + `, ` + qualify("ev", eventCols) + `, ` + qualify("e", endpointCols) + `
FROM claimed c
JOIN due ON due.id = c.id
JOIN events ev ON ev.id = c.event_id
JOIN endpoints e ON e.id = c.endpoint_id
ORDER BY due.due_at, c.id`
}

// DeliveryClaim takes up to p.Limit due deliveries under a new lease.
// Concurrent claimers, on this node or others, never get the same delivery.
func (s *Store) DeliveryClaim(ctx context.Context, p *store.DeliveryClaimParams) ([]*store.ClaimedDelivery, error) {
	if p.Limit <= 0 {
		return []*store.ClaimedDelivery{}, nil
	}
	rows, err := s.pool.Query(ctx, claimSQL(),
		nowArg(p.Now), p.Limit, int64(p.LeaseMargin), int64(herald.DefaultTimeout))
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	claimed, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.ClaimedDelivery, error) {
		var d deliveryRow
		var ev eventRow
		var ep endpointRow
		if err := row.Scan(slices.Concat(d.dest(), ev.dest(), ep.dest())...); err != nil {
			return nil, err
		}
		endpoint, err := ep.endpoint()
		if err != nil {
			return nil, err
		}
		return &store.ClaimedDelivery{
			Delivery:       *d.delivery(),
			Event:          *ev.event(),
			Endpoint:       *endpoint,
			LeaseToken:     d.leaseToken,
			LeaseExpiresAt: d.dueAt.UTC(),
		}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	return claimed, nil
}

// completeSQL records one outcome: the attempt always, and the new state of
// the delivery only while it is still delivering under the lease token
// ($2). It returns whether the outcome applied and the delivery's endpoint.
// An attempt without a number is numbered after the attempts the delivery
// had counted.
const completeSQL = `
WITH n AS (
	SELECT coalesce($3::timestamptz, now()) AS t
), cur AS (
	SELECT id, endpoint_id, attempt_count FROM deliveries WHERE id = $1
), upd AS (
	UPDATE deliveries d SET
		status = $4::text,
		attempt_count = d.attempt_count + 1,
		due_at = CASE WHEN $4::text = 'pending' THEN n.t + $5::bigint * interval '1 microsecond' END,
		last_status_code = $9::int,
		last_error = $12::text,
		dead_reason = CASE WHEN $4::text = 'dead' THEN $6::text ELSE '' END,
		delivered_at = CASE WHEN $4::text = 'delivered' THEN n.t ELSE d.delivered_at END,
		updated_at = n.t
	FROM n
	WHERE d.id = $1 AND d.status = 'delivering' AND d.lease_token = $2
	RETURNING d.id
), att AS (
	INSERT INTO attempts (id, delivery_id, endpoint_id, number, attempted_at,
		duration_ns, status_code, response, error)
	SELECT $7, cur.id, cur.endpoint_id,
		CASE WHEN $8::int > 0 THEN $8::int ELSE cur.attempt_count + 1 END,
		coalesce($13::timestamptz, n.t), $10::bigint, $9::int, $11::bytea, $12::text
	FROM cur, n
)
SELECT EXISTS (SELECT 1 FROM upd), coalesce((SELECT endpoint_id FROM cur), '')`

// DeliveryCompleteMany writes a batch of outcomes in one transaction and
// one round trip for the outcomes (a pgx batch), plus one more statement
// per endpoint to disable. Every outcome's attempt is logged; an outcome
// applies only while its lease holds, and a stale one is reported as not
// applied rather than as an error (invariant 10). The endpoints that
// applied outcomes ask to disable are disabled once all outcomes are
// written, in the same transaction, as EndpointSetEnabled does: their live
// deliveries go dead (endpoint_disabled), including one an outcome has
// just put back to pending.
func (s *Store) DeliveryCompleteMany(ctx context.Context, p *store.DeliveryCompleteManyParams) ([]bool, error) {
	applied := make([]bool, len(p.Outcomes))
	if len(p.Outcomes) == 0 {
		return applied, nil
	}
	batch := &pgx.Batch{}
	var disabling []string
	for i := range p.Outcomes {
		o := &p.Outcomes[i]
		switch o.Status {
		case herald.StatusDelivered, herald.StatusDead, herald.StatusPending:
		default:
			return nil, fmt.Errorf("complete deliveries: outcome for %s: status %q is not delivered, dead or pending", o.DeliveryID, o.Status)
		}
		if o.DisableEndpoint != "" {
			disabling = append(disabling, o.DeliveryID)
		}
	}
	if len(disabling) > 0 {
		// Lock the endpoints to disable before any delivery row, the order
		// in which every writer takes them, so no two writers deadlock.
		batch.Queue(`
			SELECT id FROM endpoints
			WHERE id IN (SELECT endpoint_id FROM deliveries WHERE id = ANY($1))
			ORDER BY id FOR UPDATE`, disabling)
	}
	for i := range p.Outcomes {
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
		batch.Queue(completeSQL,
			o.DeliveryID, o.LeaseToken, nowArg(p.Now), string(o.Status), micros(o.RetryIn),
			string(o.DeadReason), id, a.Number, a.StatusCode, int64(a.Duration), a.Response,
			a.Error, nowArg(a.AttemptedAt))
	}

	err := s.inTx(ctx, func(tx pgx.Tx) error {
		results := tx.SendBatch(ctx, batch)
		if len(disabling) > 0 {
			if _, err := results.Exec(); err != nil {
				results.Close()
				return fmt.Errorf("lock endpoints: %w", err)
			}
		}
		disable := map[string]string{} // endpoint id -> reason
		var order []string
		for i := range p.Outcomes {
			var endpointID string
			if err := results.QueryRow().Scan(&applied[i], &endpointID); err != nil {
				results.Close()
				return fmt.Errorf("outcome for %s: %w", p.Outcomes[i].DeliveryID, err)
			}
			if applied[i] && p.Outcomes[i].DisableEndpoint != "" && endpointID != "" {
				if _, seen := disable[endpointID]; !seen {
					order = append(order, endpointID)
				}
				disable[endpointID] = p.Outcomes[i].DisableEndpoint
			}
		}
		if err := results.Close(); err != nil {
			return err
		}
		for _, endpointID := range order {
			_, err := disableEndpoint(ctx, tx, endpointID, disable[endpointID], "", p.Now)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) { // a deleted endpoint needs no disabling
				return fmt.Errorf("disable endpoint %s: %w", endpointID, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("complete deliveries: %w", err)
	}
	return applied, nil
}

// DeliveryRelease hands leases back: each delivery still delivering under
// its token becomes pending and due now, its attempt count unchanged, and
// the dispatchers of every node are woken.
func (s *Store) DeliveryRelease(ctx context.Context, p *store.DeliveryReleaseParams) error {
	if len(p.Leases) == 0 {
		return nil
	}
	ids := make([]string, len(p.Leases))
	tokens := make([]int64, len(p.Leases))
	for i, l := range p.Leases {
		ids[i], tokens[i] = l.DeliveryID, l.LeaseToken
	}
	_, err := s.pool.Exec(ctx, `
		WITH released AS (
			UPDATE deliveries d SET status = 'pending', due_at = n.t, updated_at = n.t
			FROM unnest($1::text[], $2::bigint[]) AS l(id, token),
				(SELECT coalesce($3::timestamptz, now()) AS t) AS n
			WHERE d.id = l.id AND d.status = 'delivering' AND d.lease_token = l.token
			RETURNING d.id
		)
		SELECT pg_notify($4, '') WHERE EXISTS (SELECT 1 FROM released)`,
		ids, tokens, nowArg(p.Now), s.channel)
	if err != nil {
		return fmt.Errorf("release deliveries: %w", err)
	}
	return nil
}
