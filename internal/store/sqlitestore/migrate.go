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
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				m.Version, m.Name, micros(time.Now())); err != nil {
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
