package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
// schema_migrations, each in its own transaction with its record. Each
// transaction first takes a transaction-level advisory lock, so nodes
// starting together migrate once, and it holds through a transaction
// pooler, which gives each transaction whatever server session is free.
func (s *Store) Migrate(ctx context.Context) error {
	all, err := migrations()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	const lock = "SELECT pg_advisory_xact_lock(k.a, k.b) FROM (SELECT $1::int, hashtext(coalesce(current_schema(), ''))) AS k(a, b)"
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, lock, migrateLockClass); err != nil {
			return fmt.Errorf("take lock: %w", err)
		}
		_, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`)
		if err != nil {
			return err
		}
		// The release that applied each migration, and whether it
		// contracted the schema (store.CheckSchema).
		_, err = tx.Exec(ctx, `ALTER TABLE schema_migrations
			ADD COLUMN IF NOT EXISTS release text NOT NULL DEFAULT '',
			ADD COLUMN IF NOT EXISTS contract boolean NOT NULL DEFAULT false`)
		return err
	})
	if err != nil {
		return fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	applied := map[int]bool{}
	rows, err := s.pool.Query(ctx, "SELECT version, name, release, contract FROM schema_migrations")
	if err != nil {
		return fmt.Errorf("migrate: read schema_migrations: %w", err)
	}
	done, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.AppliedMigration, error) {
		var m store.AppliedMigration
		err := r.Scan(&m.Version, &m.Name, &m.Release, &m.Contract)
		return m, err
	})
	if err != nil {
		return fmt.Errorf("migrate: read schema_migrations: %w", err)
	}
	if err := store.CheckSchema(all[len(all)-1].Version, done, s.release); err != nil {
		return err
	}
	for _, m := range done {
		applied[m.Version] = true
	}

	for _, m := range all {
		if applied[m.Version] {
			continue
		}
		ran := false
		err := retryDeadlocks(ctx, s.logger, m.Name, func() error {
			return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, lock, migrateLockClass); err != nil {
					return fmt.Errorf("take lock: %w", err)
				}
				// Another node may have applied it while this one waited.
				var done bool
				if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)", m.Version).Scan(&done); err != nil || done {
					return err
				}
				if _, err := tx.Exec(ctx, m.SQL); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name, release, contract) VALUES ($1, $2, $3, $4)",
					m.Version, m.Name, s.release, store.IsContraction(m.SQL))
				ran = err == nil
				return err
			})
		})
		if err != nil {
			return fmt.Errorf("migrate: apply %s: %w", m.Name, err)
		}
		if ran {
			s.logger.Info("applied migration", "migration", m.Name)
		}
	}
	return nil
}

// migrateTries bounds how many times one migration is tried when it
// deadlocks with the nodes running beside it.
const migrateTries = 5

// retryDeadlocks runs apply, a migration's transaction, again (after
// 100 ms, then twice as long each time) while it fails with deadlock_detected
// (40P01): a migration run under load takes table locks in its own order
// (an ALTER of endpoints, then a foreign key onto events) while a node's
// ingest holds one and waits for the other, and PostgreSQL ends one of
// the two. The transaction rolled back whole, so trying it again is safe.
func retryDeadlocks(ctx context.Context, logger *slog.Logger, name string, apply func() error) error {
	wait := 100 * time.Millisecond
	for try := 1; ; try++ {
		err := apply()
		var pgErr *pgconn.PgError
		if err == nil || try == migrateTries || !errors.As(err, &pgErr) || pgErr.Code != "40P01" {
			return err
		}
		logger.Warn("migration deadlocked with a running node; trying it again", "migration", name, "try", try)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return err
		}
		wait *= 2
	}
}
