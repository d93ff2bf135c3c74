package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/heraldhooks/herald/internal/store"
)

// SettingGet returns the value stored under key, or store.ErrNotFound.
func (s *Store) SettingGet(ctx context.Context, key string) (string, error) {
	var v string
	err := s.reader.QueryRowContext(ctx, `SELECT value FROM settings WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("get setting %s: %w", key, store.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("get setting %s: %w", key, err)
	}
	return v, nil
}

// SettingPutIfAbsent stores p.Value under p.Key unless the key is set, and
// returns the value stored after the call: the first writer wins.
func (s *Store) SettingPutIfAbsent(ctx context.Context, p *store.SettingPutIfAbsentParams) (string, error) {
	var v string
	err := s.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING`, p.Key, p.Value); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT value FROM settings WHERE key = ?`, p.Key).Scan(&v)
	})
	if err != nil {
		return "", fmt.Errorf("put setting %s: %w", p.Key, err)
	}
	return v, nil
}
