package sqlitestore

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/ratelimit"
	"github.com/heraldhooks/herald/internal/store"
)

// candidatesQuery picks, in random order, the enabled endpoints that are
// not blocked (paused, or breaker open) and have a due delivery, with their
// token bucket and how many of their leases are unexpired. It starts from
// the due rows of endpoint_queue (its due index), so endpoints with nothing
// due, however many, cost it nothing. A FIFO endpoint has due work only
// when its head (the live delivery ingested first) is due. The due checks
// are EXISTS probes of deliveries_endpoint_queue, one for new deliveries
// and one for retries, so each stops at its first row. Arguments: now,
// then the limit.
var candidatesQuery = `SELECT ` + prefixed("e", endpointColumns) + `, e.bucket_tokens, e.bucket_at,
		(SELECT count(*) FROM deliveries f INDEXED BY deliveries_in_flight
			WHERE f.endpoint_id = e.id AND f.status = 'delivering' AND f.due_at > ?1) AS in_flight
	FROM endpoint_queue q INDEXED BY endpoint_queue_rank
	CROSS JOIN endpoints e ON e.id = q.endpoint_id
	WHERE q.due_at <= ?1 AND e.enabled = 1 AND e.deleted_at IS NULL AND (e.blocked_until IS NULL OR e.blocked_until <= ?1)
		AND CASE WHEN e.ordering = 'fifo' THEN
			(SELECT h.due_at FROM deliveries h INDEXED BY deliveries_endpoint_seq
				WHERE h.endpoint_id = e.id AND h.status IN ` + liveStatuses + `
				ORDER BY h.seq LIMIT 1) <= ?1
		ELSE
			EXISTS (SELECT 1 FROM deliveries d INDEXED BY deliveries_endpoint_queue
				WHERE d.endpoint_id = e.id AND d.status IN ` + liveStatuses + `
					AND (d.attempt_count > 0) = 0 AND d.due_at <= ?1)
			OR EXISTS (SELECT 1 FROM deliveries d INDEXED BY deliveries_endpoint_queue
				WHERE d.endpoint_id = e.id AND d.status IN ` + liveStatuses + `
					AND (d.attempt_count > 0) = 1 AND d.due_at <= ?1)
		END
	ORDER BY random()
	LIMIT CAST(?2 AS INTEGER)`

// claimedColumns are a claimed delivery with its event, its stored due_at
// (for a delivering row, the lease expiry), its seq and its lost leases.
var claimedColumns = prefixed("d", deliveryColumns) + `, ` + prefixed("ev", eventColumns) + `, d.due_at, d.seq, d.lease_losses`

// A prepared statement's LIMIT is an expression, never a bare parameter:
// SQLite reads a bare parameter's value into the plan and so prepares the
// statement again whenever the value changes, which a claim's limit does
// on nearly every call (it cost an eighth of the CPU of a busy node, all
// of it inside the write lock).
//
// takeQuery takes an endpoint's due deliveries of one kind, new
// (attempt_count 0) or retries, oldest due first, then in ingest order:
// a range of deliveries_endpoint_queue. Arguments: endpoint id, retries
// (0 or 1), now, limit.
var takeQuery = `SELECT ` + claimedColumns + `
	FROM deliveries d INDEXED BY deliveries_endpoint_queue
	JOIN events ev ON ev.id = d.event_id
	WHERE d.endpoint_id = ? AND d.status IN ` + liveStatuses + ` AND (d.attempt_count > 0) = ? AND d.due_at <= ?
	ORDER BY d.due_at, d.seq
	LIMIT CAST(? AS INTEGER)`

// leaseQuery marks deliveries delivering under a new lease token, one
// statement for a whole round of a claim. Arguments: a JSON array of
// [delivery id, lease expiry] pairs, now.
const leaseQuery = `UPDATE deliveries
	SET status = 'delivering', lease_token = lease_token + 1, due_at = l.expiry, updated_at = ?2
	FROM (SELECT value ->> 0 AS id, value ->> 1 AS expiry FROM json_each(?1)) AS l
	WHERE deliveries.id = l.id
	RETURNING deliveries.id, deliveries.lease_token`

// headQuery reads a FIFO endpoint's head: its live delivery ingested first.
var headQuery = `SELECT ` + claimedColumns + `
	FROM deliveries d INDEXED BY deliveries_endpoint_seq
	JOIN events ev ON ev.id = d.event_id
	WHERE d.endpoint_id = ? AND d.status IN ` + liveStatuses + `
	ORDER BY d.seq
	LIMIT 1`

// claimTarget is one candidate endpoint of a claim.
type claimTarget struct {
	ep     herald.Endpoint
	bucket ratelimit.Bucket
	// allowance is how many of its deliveries this claim may take.
	allowance int
	probe     bool
	// leaseExpiry is when the leases taken from it run out.
	leaseExpiry time.Time
	taken       []*claimedRow
	// exhausted: it gave fewer than it was asked for, so it has no more.
	exhausted bool
}

// claimedRow is a claimed delivery with what orders the claim's answer,
// and its lost leases (store.LeaseLossesEnd).
type claimedRow struct {
	c      *store.ClaimedDelivery
	due    int64
	seq    int64
	losses int
}

// DeliveryClaim leases up to p.Limit due deliveries, sharing the limit
// fairly among the endpoints with due work and keeping each endpoint's
// breaker, pause, in-flight cap, token bucket and FIFO order (see
// store.Store). All of it happens in one write transaction, and SQLite has
// one writer, so no two claims overlap: the in-flight counts and buckets
// they read are exact.
func (s *Store) DeliveryClaim(ctx context.Context, p *store.DeliveryClaimParams) ([]*store.ClaimedDelivery, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	t := now(p.Now)
	st, err := s.prepared(ctx)
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	var out []*store.ClaimedDelivery
	var notes []herald.Notification
	err = s.write(ctx, func(tx *sql.Tx) error {
		notes = nil // a write tried again starts afresh
		targets, err := claimTargets(ctx, tx.StmtContext(ctx, st.candidates), p, t, s.secrets)
		if err != nil {
			return err
		}
		if len(targets) == 0 {
			return nil
		}
		rows, err := takeShares(ctx, tx, st, targets, p.Limit, t)
		if err != nil {
			return err
		}
		if err := countLeaseLosses(ctx, tx, rows); err != nil {
			return err
		}
		var ended []*claimedRow
		if rows, ended = splitLeaseLost(rows, p.MaxLeaseLosses, targets); len(ended) > 0 {
			if notes, err = endLeaseLost(ctx, tx, st, ended, t); err != nil {
				return err
			}
		}
		spend, health := tx.StmtContext(ctx, st.spendBucket), tx.StmtContext(ctx, st.writeHealth)
		for _, tg := range targets {
			if err := afterClaim(ctx, spend, health, tg, t); err != nil {
				return err
			}
		}
		// Oldest due first; deliveries due together in ingest order.
		slices.SortFunc(rows, func(a, b *claimedRow) int {
			return cmp.Or(cmp.Compare(a.due, b.due), cmp.Compare(a.seq, b.seq))
		})
		out = make([]*store.ClaimedDelivery, len(rows))
		for i, r := range rows {
			out[i] = r.c
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	if len(notes) > 0 {
		if p.Notify != nil {
			for _, n := range notes {
				p.Notify(n)
			}
		}
		s.notify() // their events' deliveries are due
	}
	return out, nil
}

// claimTargets reads candidate endpoints in random order and keeps those
// that may give something now, each with its allowance, until p.Limit of
// them are found. It reads up to twice that many candidates, so that
// endpoints at their cap do not leave a small claim empty-handed.
func claimTargets(ctx context.Context, candidates *sql.Stmt, p *store.DeliveryClaimParams, t time.Time, sec store.Secrets) ([]*claimTarget, error) {
	rows, err := candidates.QueryContext(ctx, micros(t), 2*p.Limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var targets []*claimTarget
	for rows.Next() && len(targets) < p.Limit {
		tg := &claimTarget{}
		var (
			bucketAt sql.NullInt64
			inFlight int
			sealed   bool
		)
		dest, finish := endpointDest(&tg.ep, &sealed)
		if err := rows.Scan(append(dest, &tg.bucket.Tokens, &bucketAt, &inFlight)...); err != nil {
			return nil, err
		}
		if err := finish(); err != nil {
			return nil, err
		}
		if bucketAt.Valid {
			tg.bucket.At = fromMicros(bucketAt.Int64)
		}
		var n int
		n, tg.probe = store.ClaimAllowance(&tg.ep, tg.bucket, inFlight, t)
		if n <= 0 {
			continue
		}
		// Only the endpoints kept need their secrets: the sender signs
		// with them.
		if err := sec.OpenEndpoint(&tg.ep, sealed); err != nil {
			return nil, err
		}
		tg.allowance = min(n, p.Limit)
		tg.leaseExpiry = t.Add(p.LeaseFor(&tg.ep)).Truncate(time.Microsecond)
		targets = append(targets, tg)
	}
	return targets, rows.Err()
}

// takeShares deals limit out to the targets one delivery per endpoint per
// round, takes each endpoint's share and leases it. An endpoint that has
// fewer due deliveries than its share leaves the rest to the others in a
// further deal, so a claim is only short when every endpoint is.
func takeShares(ctx context.Context, tx *sql.Tx, st *statements, targets []*claimTarget, limit int, t time.Time) ([]*claimedRow, error) {
	take, head, lease := tx.StmtContext(ctx, st.take), tx.StmtContext(ctx, st.head), tx.StmtContext(ctx, st.lease)
	var all []*claimedRow
	left := limit
	for left > 0 {
		shares := deal(targets, left)
		if len(shares) == 0 {
			break
		}
		var round []*claimedRow
		for tg, share := range shares {
			var (
				got []*claimedRow
				err error
			)
			if tg.ep.Ordering == herald.OrderingFIFO {
				got, err = takeHead(ctx, head, tg, t)
			} else {
				got, err = takeDue(ctx, take, tg, share, t)
			}
			if err != nil {
				return nil, err
			}
			for _, r := range got {
				r.c.LeaseExpiresAt = tg.leaseExpiry
			}
			tg.taken = append(tg.taken, got...)
			round = append(round, got...)
			left -= len(got)
			if len(got) < share {
				tg.exhausted = true
			}
		}
		if err := leaseRows(ctx, lease, round, t); err != nil {
			return nil, err
		}
		all = append(all, round...)
	}
	return all, nil
}

// leaseRows leases the deliveries of one round in one statement and sets
// their lease tokens, and marks those taken from an expired lease as
// redelivered.
func leaseRows(ctx context.Context, lease *sql.Stmt, rows []*claimedRow, t time.Time) error {
	if len(rows) == 0 {
		return nil
	}
	pairs := make([][2]any, len(rows))
	byID := make(map[string]*claimedRow, len(rows))
	for i, r := range rows {
		c := r.c
		pairs[i] = [2]any{c.Delivery.ID, micros(c.LeaseExpiresAt)}
		byID[c.Delivery.ID] = r
		// A delivering row is due only once its lease has run out: the
		// attempt under that lease was lost.
		c.Redelivered = c.Delivery.Status == herald.StatusDelivering
		c.Delivery.Status = herald.StatusDelivering
		c.Delivery.NextAttemptAt = nil
		c.Delivery.UpdatedAt = t
	}
	arg, err := json.Marshal(pairs)
	if err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	res, err := lease.QueryContext(ctx, string(arg), micros(t))
	if err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	defer res.Close()
	n := 0
	for res.Next() {
		var (
			id    string
			token int64
		)
		if err := res.Scan(&id, &token); err != nil {
			return fmt.Errorf("lease: %w", err)
		}
		r, ok := byID[id]
		if !ok {
			return fmt.Errorf("lease: leased %s, which was not taken", id)
		}
		r.c.LeaseToken = token
		n++
	}
	if err := res.Err(); err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	if n != len(rows) {
		return fmt.Errorf("lease: leased %d of %d deliveries taken", n, len(rows))
	}
	return nil
}

// deal shares n out among the targets that can still give, one per
// endpoint per round in the targets' (random) order.
func deal(targets []*claimTarget, n int) map[*claimTarget]int {
	shares := map[*claimTarget]int{}
	for n > 0 {
		dealt := false
		for _, tg := range targets {
			if n == 0 {
				break
			}
			if tg.exhausted || len(tg.taken)+shares[tg] >= tg.allowance {
				continue
			}
			shares[tg]++
			n--
			dealt = true
		}
		if !dealt {
			break
		}
	}
	return shares
}

// takeDue reads up to n due deliveries of a target, new ones before
// retries, oldest due first within each.
func takeDue(ctx context.Context, take *sql.Stmt, tg *claimTarget, n int, t time.Time) ([]*claimedRow, error) {
	var out []*claimedRow
	for _, retries := range []int{0, 1} {
		if len(out) == n {
			break
		}
		rows, err := take.QueryContext(ctx, tg.ep.ID, retries, micros(t), n-len(out))
		if err != nil {
			return nil, err
		}
		got, err := scanClaimed(rows, &tg.ep)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	return out, nil
}

// takeHead reads a FIFO target's head if it is due: pending and due, or
// delivering under an expired lease (its attempt was lost).
func takeHead(ctx context.Context, head *sql.Stmt, tg *claimTarget, t time.Time) ([]*claimedRow, error) {
	rows, err := head.QueryContext(ctx, tg.ep.ID)
	if err != nil {
		return nil, err
	}
	got, err := scanClaimed(rows, &tg.ep)
	if err != nil {
		return nil, err
	}
	if len(got) == 0 || got[0].due > micros(t) {
		return nil, nil
	}
	return got, nil
}

// scanClaimed reads rows of claimedColumns and closes them.
func scanClaimed(rows *sql.Rows, ep *herald.Endpoint) ([]*claimedRow, error) {
	defer rows.Close()
	var out []*claimedRow
	for rows.Next() {
		r := &claimedRow{c: &store.ClaimedDelivery{Endpoint: *ep}}
		dd, finishD := deliveryDest(&r.c.Delivery)
		de, finishEv := eventDest(&r.c.Event)
		if err := rows.Scan(append(append(dd, de...), &r.due, &r.seq, &r.losses)...); err != nil {
			return nil, err
		}
		finishD()
		finishEv()
		r.c.LeaseLosses = r.losses
		out = append(out, r)
	}
	return out, rows.Err()
}

// afterClaim writes what a claim changed of a target: its token bucket,
// spent by what it gave, and, for a probe, the half-open breaker whose next
// probe may go when this one's lease has run out.
func afterClaim(ctx context.Context, spend, health *sql.Stmt, tg *claimTarget, t time.Time) error {
	ep := &tg.ep
	w := store.AfterClaim(ep, tg.bucket, len(tg.taken), tg.probe, tg.leaseExpiry, t)
	if b := w.Bucket; b != nil {
		if _, err := spend.ExecContext(ctx, b.Tokens, micros(b.At), ep.ID); err != nil {
			return fmt.Errorf("spend tokens of endpoint %s: %w", ep.ID, err)
		}
	}
	if w.Health != nil {
		ep.Health = *w.Health
		if err := writeHealth(ctx, health, ep.ID, &ep.Health); err != nil {
			return err
		}
		for _, r := range tg.taken {
			r.c.Endpoint.Health = ep.Health
		}
	}
	return nil
}
