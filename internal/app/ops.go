package app

import (
	"context"
	"errors"

	"github.com/heraldhooks/herald/internal/config"
	"github.com/heraldhooks/herald/internal/store/pgstore"
	"github.com/heraldhooks/herald/internal/store/sqlitestore"
)

// MaxMigrations is the newest schema migration this build knows, for
// each backend (herald version).
func MaxMigrations() (postgres, sqlite int) {
	return pgstore.MaxMigration(), sqlitestore.MaxMigration()
}

// Backup writes a consistent copy of the SQLite database db names to to
// while nodes keep running on it (herald backup); it refuses PostgreSQL,
// which its own tools back up.
func Backup(ctx context.Context, db, to string, force bool) error {
	kind, path, err := config.ParseDB(db)
	if err != nil {
		return err
	}
	if kind == config.DBPostgres {
		return errors.New("backup: herald backup copies SQLite only; back up PostgreSQL with pg_dump (a logical copy) or pg_basebackup with WAL archiving (point-in-time recovery)")
	}
	return sqlitestore.Backup(ctx, path, to, force)
}
