package pgstore

import (
	"context"
	"embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhooks/herald/internal/store"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrateLockClass is the first key of the two-key advisory lock Migrate
// holds; the second is a hash of the current schema, so installations in
// different schemas migrate without waiting for each other.
const migrateLockClass = 0x4852_4c44 // "HRLD"

// migrations reads the embedded migrations, ordered by number.
func migrations() ([]store.Migration, error) { return store.ReadMigrations(migrationFS) }

// Migrate applies the embedded migrations not yet recorded in
// schema_migrations, each in its own transaction, while holding an advisory
// lock on one connection so that nodes starting together migrate once.
func (s *Store) Migrate(ctx context.Context) error {
	all, err := migrations()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer conn.Release()

	const lockKey = "SELECT $1::int, hashtext(coalesce(current_schema(), ''))"
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(k.a, k.b) FROM ("+lockKey+") AS k(a, b)", migrateLockClass); err != nil {
		return fmt.Errorf("migrate: take lock: %w", err)
	}
	defer func() {
		// If unlocking fails the connection is broken, and PostgreSQL
		// releases a session lock when its session ends.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock(k.a, k.b) FROM ("+lockKey+") AS k(a, b)", migrateLockClass); err != nil {
			_ = conn.Conn().Close(ctx)
		}
	}()

	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	applied := map[int]bool{}
	rows, err := conn.Query(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return fmt.Errorf("migrate: read schema_migrations: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return fmt.Errorf("migrate: read schema_migrations: %w", err)
	}
	for _, v := range versions {
		applied[int(v)] = true
	}

	for _, m := range all {
		if applied[m.Version] {
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.Version, m.Name)
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate: apply %s: %w", m.Name, err)
		}
		s.logger.Info("applied migration", "migration", m.Name)
	}
	return nil
}
