package sqlitestore

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"time"

	"github.com/heraldhooks/herald/internal/store"
)

// migrationFiles are the numbered schema changes, forward only:
// NNNN_name.sql, applied in order, each once.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrations reads the embedded migrations, ordered by number.
func migrations() ([]store.Migration, error) { return store.ReadMigrations(migrationFiles) }

// Migrate applies the embedded migrations not yet recorded in
// schema_migrations, each in its own transaction with its record, so a
// failure leaves the schema at the last whole step.
func (s *Store) Migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := s.writer.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at INTEGER NOT NULL
	) STRICT`); err != nil {
		return fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	if err := s.checkSchema(ctx, ms[len(ms)-1].Version); err != nil {
		return err
	}
	for _, m := range ms {
		applied := false
		err := s.write(ctx, func(tx *sql.Tx) error {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, m.Version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at, release, contract) VALUES (?, ?, ?, ?, ?)`,
				m.Version, m.Name, micros(time.Now()), s.release, store.IsContraction(m.SQL)); err != nil {
				return err
			}
			applied = true
			return nil
		})
		if err != nil {
			return fmt.Errorf("migrate %s: %w", m.Name, err)
		}
		if applied {
			s.logger.Info("applied migration", "migration", m.Name)
		}
	}
	s.startLister()
	return nil
}

// checkSchema records, from now on, the release that applied each
// migration and whether it contracted the schema, and refuses a database
// that a migration this build does not know contracted
// (store.CheckSchema).
func (s *Store) checkSchema(ctx context.Context, known int) error {
	// In one write transaction, so nodes starting together extend it once.
	err := s.write(ctx, func(tx *sql.Tx) error {
		for _, col := range []struct{ name, decl string }{
			{"release", "release TEXT NOT NULL DEFAULT ''"},
			{"contract", "contract INTEGER NOT NULL DEFAULT 0"},
		} {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('schema_migrations') WHERE name = ?`, col.name).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				continue
			}
			if _, err := tx.ExecContext(ctx, `ALTER TABLE schema_migrations ADD COLUMN `+col.decl); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("migrate: extend schema_migrations: %w", err)
	}
	rows, err := s.writer.QueryContext(ctx, `SELECT version, name, release, contract FROM schema_migrations WHERE version > ?`, known)
	if err != nil {
		return fmt.Errorf("migrate: read schema_migrations: %w", err)
	}
	defer rows.Close()
	var done []store.AppliedMigration
	for rows.Next() {
		var m store.AppliedMigration
		if err := rows.Scan(&m.Version, &m.Name, &m.Release, &m.Contract); err != nil {
			return fmt.Errorf("migrate: read schema_migrations: %w", err)
		}
		done = append(done, m)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("migrate: read schema_migrations: %w", err)
	}
	return store.CheckSchema(known, done, s.release)
}
