package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhooks/herald/internal/store"
)

// SettingGet returns the setting stored under key, or store.ErrNotFound.
func (s *Store) SettingGet(ctx context.Context, key string) (string, error) {
	var value string
	err := s.pool.QueryRow(ctx, "SELECT value FROM settings WHERE key = $1", key).Scan(&value)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("get setting %s: %w", key, store.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("get setting %s: %w", key, err)
	}
	return value, nil
}

// SettingPutIfAbsent stores p.Value under p.Key unless the key is set, and
// returns the value stored after the call. When two nodes race, the insert
// of the second waits for the first to commit and then reads its value.
func (s *Store) SettingPutIfAbsent(ctx context.Context, p *store.SettingPutIfAbsentParams) (string, error) {
	var stored string
	err := s.pool.QueryRow(ctx,
		"INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING RETURNING value",
		p.Key, p.Value).Scan(&stored)
	if err == nil {
		return stored, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("put setting %s: %w", p.Key, err)
	}
	// The key was set already; a new statement sees the committed value.
	if err := s.pool.QueryRow(ctx, "SELECT value FROM settings WHERE key = $1", p.Key).Scan(&stored); err != nil {
		return "", fmt.Errorf("put setting %s: read stored value: %w", p.Key, err)
	}
	return stored, nil
}
