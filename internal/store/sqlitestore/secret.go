package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/heraldhooks/herald/internal/store"
)

// resealPlainQuery reads a batch of endpoints whose secrets or client key
// are plain (store.SealedForm). Arguments: after, limit.
const resealPlainQuery = `SELECT id, secret, previous_secret, secrets_encrypted, client_key
	FROM endpoints INDEXED BY endpoints_plain_secrets
	WHERE secrets_encrypted = 0 AND id > ?1
	UNION
	SELECT id, secret, previous_secret, secrets_encrypted, client_key
	FROM endpoints INDEXED BY endpoints_plain_client_keys
	WHERE client_key <> '' AND substr(client_key, 1, 7) <> 'enc:v1:' AND id > ?1
	ORDER BY id LIMIT ?2`

// resealQuery reads a batch of endpoints with a secret plain or not sealed
// under the current key, whose values begin with ?2. Arguments: after,
// prefix, limit.
const resealQuery = `SELECT id, secret, previous_secret, secrets_encrypted, client_key
	FROM endpoints
	WHERE id > ?1 AND (secrets_encrypted = 0
		OR (secret <> '' AND substr(secret, 1, length(?2)) <> ?2)
		OR (previous_secret <> '' AND substr(previous_secret, 1, length(?2)) <> ?2)
		OR (client_key <> '' AND substr(client_key, 1, length(?2)) <> ?2))
	ORDER BY id LIMIT ?3`

// EndpointSecretsReseal seals one batch of endpoints' secrets under the
// current key (see store.SecretStore). The batch is read and written in
// one write transaction, which holds the database, so nothing changes in
// between and Changed stays 0; the writes are conditional all the same.
func (s *Store) EndpointSecretsReseal(ctx context.Context, p *store.EndpointSecretsResealParams) (*store.EndpointSecretsResealResult, error) {
	if !s.secrets.HasKey() {
		return nil, fmt.Errorf("re-encrypt endpoint secrets: %w", store.ErrNoKey)
	}
	limit := store.ClampLimit(p.Limit)
	out := &store.EndpointSecretsResealResult{}
	err := s.write(ctx, func(tx *sql.Tx) error {
		*out = store.EndpointSecretsResealResult{}
		var rows *sql.Rows
		var err error
		if p.PlainOnly {
			rows, err = tx.QueryContext(ctx, resealPlainQuery, p.After, limit)
		} else {
			rows, err = tx.QueryContext(ctx, resealQuery, p.After, s.secrets.Prefix(), limit)
		}
		if err != nil {
			return err
		}
		var batch []store.ResealRow
		for rows.Next() {
			var r store.ResealRow
			if err := rows.Scan(&r.ID, &r.Secret, &r.Previous, &r.Sealed, &r.ClientKey); err != nil {
				rows.Close()
				return err
			}
			batch = append(batch, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, r := range batch {
			secret, previous, err := r.Reseal(s.secrets)
			if err != nil {
				return err
			}
			clientKey, err := r.ResealClientKey(s.secrets)
			if err != nil {
				return err
			}
			res, err := tx.ExecContext(ctx, `UPDATE endpoints
				SET secret = ?, previous_secret = ?, secrets_encrypted = 1, client_key = ?
				WHERE id = ? AND secret = ? AND previous_secret = ? AND secrets_encrypted = ? AND client_key = ?`,
				secret, previous, clientKey, r.ID, r.Secret, r.Previous, r.Sealed, r.ClientKey)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			out.Tally(n)
		}
		out.After(batch, limit)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("re-encrypt endpoint secrets: %w", err)
	}
	return out, nil
}

// secretKeysQuery counts stored secret values by the key that sealed them
// (an empty key id for plain ones), with the first endpoint (by id) of each
// and its value.
// A sealed value is enc:v1:<key id>:..., so its key id starts at the 8th
// character and ends before the next colon.
const secretKeysQuery = `WITH v AS (
		SELECT id, secret AS val, secrets_encrypted AS sealed FROM endpoints WHERE secret <> ''
		UNION ALL
		SELECT id, previous_secret, secrets_encrypted FROM endpoints WHERE previous_secret <> ''
		UNION ALL
		SELECT id, client_key, substr(client_key, 1, 7) = 'enc:v1:' FROM endpoints WHERE client_key <> ''
	), k AS (
		SELECT id, val, sealed,
			CASE WHEN sealed = 0 THEN '' ELSE substr(val, 8, instr(substr(val, 8), ':') - 1) END AS key_id
		FROM v
	), n AS (
		SELECT key_id, id, val, sealed,
			count(*) OVER (PARTITION BY key_id) AS values_n,
			row_number() OVER (PARTITION BY key_id ORDER BY id) AS rn
		FROM k
	)
	SELECT key_id, values_n, id, val, sealed FROM n WHERE rn = 1 ORDER BY key_id`

// EndpointSecretKeys counts the stored secrets by key (see
// store.SecretStore), trying one value of each key with the store's ring.
func (s *Store) EndpointSecretKeys(ctx context.Context) ([]store.SecretKeyUse, error) {
	rows, err := s.reader.QueryContext(ctx, secretKeysQuery)
	if err != nil {
		return nil, fmt.Errorf("count endpoint secrets by key: %w", err)
	}
	defer rows.Close()
	out := []store.SecretKeyUse{}
	for rows.Next() {
		var u store.SecretKeyUse
		var val string
		var sealed bool
		if err := rows.Scan(&u.KeyID, &u.Values, &u.SampleEndpointID, &val, &sealed); err != nil {
			return nil, fmt.Errorf("count endpoint secrets by key: %w", err)
		}
		u.SampleErr = s.secrets.SampleErr(u.SampleEndpointID, val, sealed)
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count endpoint secrets by key: %w", err)
	}
	return out, nil
}
