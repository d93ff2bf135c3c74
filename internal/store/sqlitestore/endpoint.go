package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

// endpointColumns are read by scanEndpoint, in this order.
const endpointColumns = `id, consumer_id, url, description, event_types, secret, previous_secret,
	previous_secret_expires_at, enabled, disabled_reason, timeout_ns, retry_schedule,
	retry_exponential, retry_client_errors, rate_limit, max_in_flight, signature_scheme,
	headers, created_at, updated_at, ordering, auto_disable_after_failures, auto_disable_after_ns,
	health, secrets_encrypted, client_certificate, client_key, filter, no_trace_propagation`

// prefixed qualifies each of a comma-separated column list with alias.
func prefixed(alias, columns string) string {
	cols := strings.Split(columns, ",")
	for i, c := range cols {
		cols[i] = alias + "." + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}

// endpointDest returns scan destinations for endpointColumns and a function
// that decodes them into ep once scanned. The secrets stay as stored, and
// sealed says whether they are sealed: the caller opens them
// (store.Secrets.OpenEndpoint) if it needs them.
func endpointDest(ep *herald.Endpoint, sealed *bool) ([]any, func() error) {
	var (
		prevExpires                                           sql.NullInt64
		eventTypes, schedule, exponential, rateLimit, headers string
		timeoutNS, createdAt, updatedAt, autoDisableAfterNS   int64
		scheme, ordering, health                              string
	)
	dest := []any{
		&ep.ID, &ep.ConsumerID, &ep.URL, &ep.Description, &eventTypes, &ep.Secret, &ep.PreviousSecret,
		&prevExpires, &ep.Enabled, &ep.DisabledReason, &timeoutNS, &schedule,
		&exponential, &ep.RetryClientErrors, &rateLimit, &ep.MaxInFlight, &scheme,
		&headers, &createdAt, &updatedAt, &ordering, &ep.AutoDisableAfterFailures, &autoDisableAfterNS,
		&health, sealed, &ep.ClientCertificate, &ep.ClientKey, &ep.Filter, &ep.NoTracePropagation,
	}
	return dest, func() error {
		ep.PreviousSecretExpiresAt = fromNullMicros(prevExpires)
		ep.Timeout = time.Duration(timeoutNS)
		ep.SignatureScheme = herald.SignatureScheme(scheme)
		ep.CreatedAt = fromMicros(createdAt)
		ep.UpdatedAt = fromMicros(updatedAt)
		ep.Ordering = herald.Ordering(ordering)
		ep.AutoDisableAfter = time.Duration(autoDisableAfterNS)
		h, err := decodeHealth(health)
		if err != nil {
			return fmt.Errorf("decode endpoint %s health: %w", ep.ID, err)
		}
		ep.Health = h
		ep.EventTypes, ep.RetrySchedule, ep.RetryExponential, ep.RateLimit, ep.Headers = nil, nil, nil, nil, nil
		for _, f := range []struct {
			name string
			raw  string
			into any
		}{
			{"event_types", eventTypes, &ep.EventTypes},
			{"retry_schedule", schedule, &ep.RetrySchedule},
			{"retry_exponential", exponential, &ep.RetryExponential},
			{"rate_limit", rateLimit, &ep.RateLimit},
			{"headers", headers, &ep.Headers},
		} {
			if err := json.Unmarshal([]byte(f.raw), f.into); err != nil {
				return fmt.Errorf("decode endpoint %s %s: %w", ep.ID, f.name, err)
			}
		}
		return nil
	}
}

// scanEndpoint reads one row of endpointColumns, its secrets opened.
func scanEndpoint(sc scanner, sec store.Secrets) (*herald.Endpoint, error) {
	ep := &herald.Endpoint{}
	var sealed bool
	dest, finish := endpointDest(ep, &sealed)
	if err := sc.Scan(dest...); err != nil {
		return nil, err
	}
	if err := finish(); err != nil {
		return nil, err
	}
	if err := sec.OpenEndpoint(ep, sealed); err != nil {
		return nil, err
	}
	return ep, nil
}

// freshHealth is the stored health of an endpoint not yet tried: a new
// endpoint's, and a re-enabled one's.
func freshHealth() string {
	h := herald.NewEndpointHealth()
	return encodeHealth(&h)
}

// endpointSettings are the JSON-encoded list-valued settings of ep.
type endpointSettings struct {
	eventTypes, schedule, exponential, rateLimit, headers string
}

func encodeSettings(ep *herald.Endpoint) (endpointSettings, error) {
	var out endpointSettings
	for _, f := range []struct {
		name string
		v    any
		into *string
	}{
		{"event_types", ep.EventTypes, &out.eventTypes},
		{"retry_schedule", ep.RetrySchedule, &out.schedule},
		{"retry_exponential", ep.RetryExponential, &out.exponential},
		{"rate_limit", ep.RateLimit, &out.rateLimit},
		{"headers", ep.Headers, &out.headers},
	} {
		b, err := json.Marshal(f.v)
		if err != nil {
			return out, fmt.Errorf("encode %s: %w", f.name, err)
		}
		*f.into = string(b)
	}
	return out, nil
}

// getEndpoint reads a live (not deleted) endpoint through q.
func (s *Store) getEndpoint(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, id string) (*herald.Endpoint, error) {
	ep, err := scanEndpoint(q.QueryRowContext(ctx,
		`SELECT `+endpointColumns+` FROM endpoints WHERE id = ? AND deleted_at IS NULL`, id), s.secrets)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return ep, err
}

// EndpointCreate stores p.Endpoint as a new endpoint and returns it as stored.
func (s *Store) EndpointCreate(ctx context.Context, p *store.EndpointCreateParams) (*herald.Endpoint, error) {
	if p.Endpoint == nil {
		return nil, errors.New("create endpoint: no endpoint given")
	}
	in := p.Endpoint
	if in.Secret == "" {
		return nil, errors.New("create endpoint: secret is required")
	}
	t := now(p.Now)
	id := in.ID
	if id == "" {
		id = herald.NewID(herald.PrefixEndpoint, t)
	}
	set, err := encodeSettings(in)
	if err != nil {
		return nil, fmt.Errorf("create endpoint: %w", err)
	}
	secret, sealed, err := s.secrets.Seal(id, in.Secret)
	if err != nil {
		return nil, fmt.Errorf("create endpoint: %w", err)
	}
	previous, _, err := s.secrets.Seal(id, in.PreviousSecret)
	if err != nil {
		return nil, fmt.Errorf("create endpoint: %w", err)
	}
	clientKey, err := s.secrets.SealClientKey(id, in.ClientKey)
	if err != nil {
		return nil, fmt.Errorf("create endpoint: %w", err)
	}
	var out *herald.Endpoint
	err = s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO endpoints (`+endpointColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO NOTHING`,
			id, in.ConsumerID, in.URL, in.Description, set.eventTypes, secret, previous,
			nullMicros(in.PreviousSecretExpiresAt), in.Enabled, in.DisabledReason, int64(in.Timeout), set.schedule,
			set.exponential, in.RetryClientErrors, set.rateLimit, in.MaxInFlight, string(in.SignatureScheme),
			set.headers, micros(t), micros(t), string(in.Ordering), in.AutoDisableAfterFailures, int64(in.AutoDisableAfter),
			freshHealth(), sealed, in.ClientCertificate, clientKey, in.Filter, in.NoTracePropagation)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return fmt.Errorf("id %s is taken: %w", id, store.ErrConflict)
		}
		out, err = s.getEndpoint(ctx, tx, id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create endpoint: %w", err)
	}
	return out, nil
}

// EndpointGet returns the endpoint, or store.ErrNotFound (deleted ones too).
func (s *Store) EndpointGet(ctx context.Context, id string) (*herald.Endpoint, error) {
	ep, err := s.getEndpoint(ctx, s.reader, id)
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

// queryEndpoints reads the endpoints a query returning endpointColumns
// gives, in its order.
func (s *Store) queryEndpoints(ctx context.Context, query string, args ...any) ([]*herald.Endpoint, error) {
	rows, err := s.reader.QueryContext(ctx, query, args...)
	return collect(rows, err, func(sc scanner) (*herald.Endpoint, error) { return scanEndpoint(sc, s.secrets) })
}

// endpointListQuery is the query of an endpoint list and its arguments:
// limit+1 endpoints of p's sort, after p's cursor. Each sort is an
// index's order: the primary key, endpoints_consumer, and endpoints_url or
// endpoints_consumer_url (0013_endpoint_figures.sql).
func endpointListQuery(p *store.EndpointListParams, limit int) (string, []any, error) {
	if !p.Sort.Valid() || p.Sort.Ranked() {
		return "", nil, fmt.Errorf("unknown sort %q", p.Sort)
	}
	key, desc := p.Sort.Key()
	// col is the sort's first column; "created" is the id's order.
	col := map[string]string{"created": "", "consumer": "consumer_id", "url": "url"}[key]
	cmp, dir := ">", "ASC"
	if desc {
		cmp, dir = "<", "DESC"
	}
	w := &where{}
	w.add("deleted_at IS NULL")
	if p.ConsumerID != "" {
		w.add("consumer_id = ?", p.ConsumerID)
	}
	order := "id " + dir
	if col != "" {
		order = col + " " + dir + ", " + order
	}
	if p.Cursor != "" {
		if col == "" {
			w.add("id "+cmp+" ?", p.Cursor)
		} else {
			k, id, ok := store.ParseSortCursor(p.Cursor)
			if !ok {
				return "", nil, store.ErrInvalidCursor
			}
			w.add("("+col+", id) "+cmp+" (?, ?)", k, id)
		}
	}
	return `SELECT ` + endpointColumns + ` FROM endpoints` + w.String() + ` ORDER BY ` + order + ` LIMIT ?`,
		append(w.args, limit+1), nil
}

// EndpointUpdate replaces the endpoint's settings with those of p.Endpoint;
// id, consumer, secrets, enabled state and creation time stay; the client
// certificate and key are written as given (the key sealed anew).
func (s *Store) EndpointUpdate(ctx context.Context, p *store.EndpointUpdateParams) (*herald.Endpoint, error) {
	if p.Endpoint == nil {
		return nil, errors.New("update endpoint: no endpoint given")
	}
	in := p.Endpoint
	t := now(p.Now)
	set, err := encodeSettings(in)
	if err != nil {
		return nil, fmt.Errorf("update endpoint %s: %w", in.ID, err)
	}
	clientKey, err := s.secrets.SealClientKey(in.ID, in.ClientKey)
	if err != nil {
		return nil, fmt.Errorf("update endpoint %s: %w", in.ID, err)
	}
	var out *herald.Endpoint
	err = s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE endpoints SET
				url = ?, description = ?, event_types = ?, timeout_ns = ?, retry_schedule = ?,
				retry_exponential = ?, retry_client_errors = ?, rate_limit = ?, max_in_flight = ?,
				signature_scheme = ?, headers = ?, ordering = ?, auto_disable_after_failures = ?,
				auto_disable_after_ns = ?, updated_at = ?, client_certificate = ?, client_key = ?,
				filter = ?, no_trace_propagation = ?
			WHERE id = ? AND deleted_at IS NULL`,
			in.URL, in.Description, set.eventTypes, int64(in.Timeout), set.schedule,
			set.exponential, in.RetryClientErrors, set.rateLimit, in.MaxInFlight,
			string(in.SignatureScheme), set.headers, string(in.Ordering), in.AutoDisableAfterFailures,
			int64(in.AutoDisableAfter), micros(t), in.ClientCertificate, clientKey, in.Filter, in.NoTracePropagation, in.ID)
		if err := oneRow(res, err); err != nil {
			return err
		}
		out, err = s.getEndpoint(ctx, tx, in.ID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("update endpoint %s: %w", in.ID, err)
	}
	return out, nil
}

// EndpointDelete removes the endpoint from view and drops its secrets; its
// live deliveries are cancelled and its history stays.
func (s *Store) EndpointDelete(ctx context.Context, p *store.EndpointDeleteParams) error {
	t := now(p.Now)
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE endpoints SET
				deleted_at = ?, updated_at = ?, enabled = 0, secret = '', previous_secret = '',
				previous_secret_expires_at = NULL, client_certificate = '', client_key = ''
			WHERE id = ? AND deleted_at IS NULL`, micros(t), micros(t), p.ID)
		if err := oneRow(res, err); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE deliveries SET status = 'cancelled', due_at = NULL, updated_at = ?
			WHERE endpoint_id = ? AND status IN ('pending', 'delivering')`, micros(t), p.ID)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete endpoint %s: %w", p.ID, err)
	}
	return nil
}

// EndpointSetEnabled enables or disables the endpoint; disabling sends its
// live deliveries dead (endpoint_disabled) in the same transaction.
func (s *Store) EndpointSetEnabled(ctx context.Context, p *store.EndpointSetEnabledParams) (*herald.Endpoint, error) {
	t := now(p.Now)
	reason := p.Reason
	if p.Enabled {
		reason = ""
	}
	var out *herald.Endpoint
	err := s.write(ctx, func(tx *sql.Tx) error {
		var err error
		if err = setEnabled(ctx, tx, p.ID, p.Enabled, reason, t); err != nil {
			return err
		}
		out, err = s.getEndpoint(ctx, tx, p.ID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("set endpoint %s enabled=%t: %w", p.ID, p.Enabled, err)
	}
	if p.Enabled {
		s.notify()
	}
	return out, nil
}

// setEnabled writes an endpoint's enabled state inside tx. Enabling starts
// its health and token bucket afresh; disabling sends its live deliveries
// dead.
func setEnabled(ctx context.Context, tx *sql.Tx, id string, enabled bool, reason string, t time.Time) error {
	if enabled {
		res, err := tx.ExecContext(ctx, `UPDATE endpoints SET enabled = 1, disabled_reason = '', updated_at = ?,
				health = ?, blocked_until = NULL, bucket_tokens = 0, bucket_at = NULL
			WHERE id = ? AND deleted_at IS NULL`, micros(t), freshHealth(), id)
		return oneRow(res, err)
	}
	res, err := tx.ExecContext(ctx, `UPDATE endpoints SET enabled = 0, disabled_reason = ?, updated_at = ?
		WHERE id = ? AND deleted_at IS NULL`, reason, micros(t), id)
	if err := oneRow(res, err); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `UPDATE deliveries SET status = 'dead', dead_reason = ?, due_at = NULL, updated_at = ?
		WHERE endpoint_id = ? AND status IN ('pending', 'delivering')`,
		string(herald.DeadEndpointDisabled), micros(t), id)
	return err
}

// EndpointRotateSecret makes p.NewSecret the secret; the old one keeps
// signing until p.PreviousValidFor after Now.
func (s *Store) EndpointRotateSecret(ctx context.Context, p *store.EndpointRotateSecretParams) (*herald.Endpoint, error) {
	if p.NewSecret == "" {
		return nil, fmt.Errorf("rotate secret of endpoint %s: new secret is required", p.ID)
	}
	t := now(p.Now)
	var out *herald.Endpoint
	err := s.write(ctx, func(tx *sql.Tx) error {
		// The write transaction holds the database: the old secret read
		// here is the one replaced.
		var old string
		var oldSealed bool
		err := tx.QueryRowContext(ctx, `SELECT secret, secrets_encrypted FROM endpoints
			WHERE id = ? AND deleted_at IS NULL`, p.ID).Scan(&old, &oldSealed)
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		secret, previous, sealed, err := s.secrets.Rotate(p.ID, p.NewSecret, old, oldSealed)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE endpoints SET
				previous_secret = ?, previous_secret_expires_at = ?, secret = ?, secrets_encrypted = ?,
				updated_at = ?
			WHERE id = ? AND deleted_at IS NULL`,
			previous, micros(t.Add(p.PreviousValidFor)), secret, sealed, micros(t), p.ID)
		if err := oneRow(res, err); err != nil {
			return err
		}
		out, err = s.getEndpoint(ctx, tx, p.ID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("rotate secret of endpoint %s: %w", p.ID, err)
	}
	return out, nil
}

// oneRow turns an UPDATE that touched no row into store.ErrNotFound.
func oneRow(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrNotFound
	}
	return nil
}
