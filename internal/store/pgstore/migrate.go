package pgstore

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrateLockClass is the first key of the two-key advisory lock Migrate
// holds; the second is a hash of the current schema, so installations in
// different schemas migrate without waiting for each other.
const migrateLockClass = 0x4852_4c44 // "HRLD"

// migration is one numbered schema change.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations reads the embedded migrations, ordered by number. Each file is
// named NNNN_what.sql.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	seen := map[int]string{}
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		version, err := strconv.Atoi(num)
		if !ok || err != nil || version <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive number and _", name)
		}
		if prev, dup := seen[version]; dup {
			return nil, fmt.Errorf("migrations %s and %s share number %d", prev, name, version)
		}
		seen[version] = name
		body, err := fs.ReadFile(migrationFS, path.Join("migrations", name))
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: version, name: name, sql: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

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
		if applied[m.version] {
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name)
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate: apply %s: %w", m.name, err)
		}
		s.logger.Info("applied migration", "migration", m.name)
	}
	return nil
}
