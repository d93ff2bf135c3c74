package store

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one numbered schema change of a backend.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// ReadMigrations reads a backend's embedded migrations from the folder
// "migrations" of fsys, ordered by number. Each file is named
// NNNN_what.sql, NNNN a positive number no other file has.
func ReadMigrations(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, "migrations")
	if err != nil {
		return nil, err
	}
	var out []Migration
	seen := map[int]string{}
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		version, err := strconv.Atoi(num)
		if !ok || err != nil || version <= 0 || !strings.HasSuffix(name, ".sql") {
			return nil, fmt.Errorf("migration %s: name must be NNNN_what.sql, NNNN a positive number", name)
		}
		if prev, dup := seen[version]; dup {
			return nil, fmt.Errorf("migrations %s and %s share number %d", prev, name, version)
		}
		seen[version] = name
		body, err := fs.ReadFile(fsys, path.Join("migrations", name))
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: version, Name: name, SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// DefaultRelease is the release a store opened without WithRelease
// records beside the migrations it applies and names in the schema
// rule's messages.
const DefaultRelease = "devel"

// contractMarker, on a line of its own in a migration file, says the
// migration contracts the schema (drops or renames what older releases
// use): a node of a release that does not know it must not run on a
// database where it was applied. A migration without it only expands
// (adds), and older nodes keep running beside it. See README "Rolling
// upgrades".
const contractMarker = "-- herald: contract"

// IsContraction says whether a migration's SQL declares itself a
// contraction (contractMarker).
func IsContraction(sql string) bool {
	for line := range strings.Lines(sql) {
		if strings.TrimSpace(line) == contractMarker {
			return true
		}
	}
	return false
}

// AppliedMigration is a row of a database's schema_migrations.
type AppliedMigration struct {
	Version  int
	Name     string
	Release  string // the release that applied it; "" before releases were recorded
	Contract bool
}

// CheckSchema is the schema rule for a node that knows migrations up to
// known: migrations it does not know that only expanded the schema are
// fine; one that contracted it refuses the node, naming the release that
// applied it.
func CheckSchema(known int, applied []AppliedMigration, this string) error {
	for _, m := range applied {
		if m.Version <= known || !m.Contract {
			continue
		}
		need := m.Release
		if need == "" {
			need = "a newer release"
		}
		return fmt.Errorf("database schema needs herald at least %s (migration %d); this is %s (migrations up to %d; %s contracted the schema)",
			need, m.Version, this, known, m.Name)
	}
	return nil
}
