package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Backup writes a consistent copy of the live SQLite database at src to
// dst with VACUUM INTO: it reads one snapshot (a read transaction of the
// write-ahead log), so nodes go on ingesting and delivering while it runs
// and the copy holds every transaction committed before it began. The copy
// is written beside dst and renamed into place, so dst is never half
// written. An existing dst is refused unless force is set.
func Backup(ctx context.Context, src, dst string, force bool) error {
	if src == "" || strings.ContainsAny(src, "?#") || strings.HasPrefix(src, "file:") || src == ":memory:" {
		return fmt.Errorf("backup: path %q must name a file (no URI, query or :memory:)", src)
	}
	if _, err := os.Stat(src); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if _, err := os.Stat(dst); err == nil && !force {
		return fmt.Errorf("backup: %s exists (--force overwrites it)", dst)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("backup: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".*.tmp")
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	tmpPath := tmp.Name()
	tmp.Close()
	os.Remove(tmpPath) // VACUUM INTO writes only to a file that is absent or empty
	defer os.Remove(tmpPath)

	db, err := sql.Open("sqlite", src+fmt.Sprintf("?_pragma=busy_timeout(%d)", busyTimeout.Milliseconds()))
	if err != nil {
		return fmt.Errorf("backup: open %s: %w", src, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, tmpPath); err != nil {
		return fmt.Errorf("backup %s: %w", src, err)
	}
	if err := syncFile(tmpPath); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if err := os.Rename(tmpPath, dst); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	return nil
}

// syncFile flushes the file at path to disk.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// MaxMigration is the number of the newest migration this build knows.
func MaxMigration() int {
	ms, err := migrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].Version
}
