package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhooks/herald/internal/store"
)

// resealPlainSQL reads a batch of endpoints whose secrets or client key
// are plain (store.SealedForm), by the partial indexes
// endpoints_plain_secrets and endpoints_plain_client_keys. Arguments:
// after, limit.
const resealPlainSQL = `
(SELECT id, secret, previous_secret, secrets_encrypted, client_key
FROM endpoints
WHERE NOT secrets_encrypted AND id > $1
UNION
SELECT id, secret, previous_secret, secrets_encrypted, client_key
FROM endpoints
WHERE client_key <> '' AND left(client_key, 7) <> 'enc:v1:' AND id > $1)
ORDER BY id LIMIT $2`

// resealSQL reads a batch of endpoints with a secret or client key plain or not sealed
// under the current key, whose values begin with $2. Arguments: after,
// prefix, limit.
const resealSQL = `
SELECT id, secret, previous_secret, secrets_encrypted, client_key
FROM endpoints
WHERE id > $1 AND (NOT secrets_encrypted
	OR (secret <> '' AND left(secret, length($2)) <> $2)
	OR (previous_secret <> '' AND left(previous_secret, length($2)) <> $2)
	OR (client_key <> '' AND left(client_key, length($2)) <> $2))
ORDER BY id LIMIT $3`

// resealWriteSQL writes one endpoint's resealed secrets, only if they are
// still as read: a rotation committed meanwhile (on any node) wins.
const resealWriteSQL = `
UPDATE endpoints SET secret = $2, previous_secret = $3, secrets_encrypted = true, client_key = $7
WHERE id = $1 AND secret = $4 AND previous_secret = $5 AND secrets_encrypted = $6 AND client_key = $8`

// EndpointSecretsReseal seals one batch of endpoints' secrets under the
// current key (see store.SecretStore), in one transaction. The batch is
// read without locks; each write is conditional, so a rotation between
// the read and the write is kept (Changed), and the write that lost waits
// for the next pass.
func (s *Store) EndpointSecretsReseal(ctx context.Context, p *store.EndpointSecretsResealParams) (*store.EndpointSecretsResealResult, error) {
	if !s.secrets.HasKey() {
		return nil, fmt.Errorf("re-encrypt endpoint secrets: %w", store.ErrNoKey)
	}
	limit := store.ClampLimit(p.Limit)
	out := &store.EndpointSecretsResealResult{}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		*out = store.EndpointSecretsResealResult{}
		var rows pgx.Rows
		var err error
		if p.PlainOnly {
			rows, err = tx.Query(ctx, resealPlainSQL, p.After, limit)
		} else {
			rows, err = tx.Query(ctx, resealSQL, p.After, s.secrets.Prefix(), limit)
		}
		if err != nil {
			return err
		}
		batch, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.ResealRow, error) {
			var r store.ResealRow
			err := row.Scan(&r.ID, &r.Secret, &r.Previous, &r.Sealed, &r.ClientKey)
			return r, err
		})
		if err != nil {
			return err
		}
		if len(batch) == 0 {
			return nil
		}
		writes := &pgx.Batch{}
		for _, r := range batch {
			secret, previous, err := r.Reseal(s.secrets)
			if err != nil {
				return err
			}
			clientKey, err := r.ResealClientKey(s.secrets)
			if err != nil {
				return err
			}
			writes.Queue(resealWriteSQL, r.ID, secret, previous, r.Secret, r.Previous, r.Sealed, clientKey, r.ClientKey)
		}
		results := tx.SendBatch(ctx, writes)
		for range batch {
			tag, err := results.Exec()
			if err != nil {
				results.Close()
				return err
			}
			out.Tally(tag.RowsAffected())
		}
		if err := results.Close(); err != nil {
			return err
		}
		out.After(batch, limit)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("re-encrypt endpoint secrets: %w", err)
	}
	return out, nil
}

// secretKeysSQL counts stored secret values (client keys too) by the key that sealed them
// (an empty key id for plain ones), with the first endpoint (by id) of each
// and its value.
// A sealed value is enc:v1:<key id>:..., so its key id is the third field
// between colons.
const secretKeysSQL = `
WITH v AS (
	SELECT id, secret AS val, secrets_encrypted AS sealed FROM endpoints WHERE secret <> ''
	UNION ALL
	SELECT id, previous_secret, secrets_encrypted FROM endpoints WHERE previous_secret <> ''
	UNION ALL
	SELECT id, client_key, left(client_key, 7) = 'enc:v1:' FROM endpoints WHERE client_key <> ''
), k AS (
	SELECT id, val, sealed, CASE WHEN sealed THEN split_part(val, ':', 3) ELSE '' END AS key_id
	FROM v
), n AS (
	SELECT key_id, id, val, sealed,
		count(*) OVER (PARTITION BY key_id) AS values_n,
		row_number() OVER (PARTITION BY key_id ORDER BY id) AS rn
	FROM k
)
SELECT key_id, values_n, id, val, sealed FROM n WHERE rn = 1 ORDER BY key_id COLLATE "C"`

// EndpointSecretKeys counts the stored secrets by key (see
// store.SecretStore), trying one value of each key with the store's ring.
func (s *Store) EndpointSecretKeys(ctx context.Context) ([]store.SecretKeyUse, error) {
	rows, err := s.pool.Query(ctx, secretKeysSQL)
	if err != nil {
		return nil, fmt.Errorf("count endpoint secrets by key: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.SecretKeyUse, error) {
		var u store.SecretKeyUse
		var val string
		var sealed bool
		if err := row.Scan(&u.KeyID, &u.Values, &u.SampleEndpointID, &val, &sealed); err != nil {
			return u, err
		}
		u.SampleErr = s.secrets.SampleErr(u.SampleEndpointID, val, sealed)
		return u, nil
	})
	if err != nil {
		return nil, fmt.Errorf("count endpoint secrets by key: %w", err)
	}
	if out == nil {
		out = []store.SecretKeyUse{}
	}
	return out, nil
}
