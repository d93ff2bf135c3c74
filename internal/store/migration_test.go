package store_test

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store"
)

func TestReadMigrations(t *testing.T) {
	t.Parallel()
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	got, err := store.ReadMigrations(fstest.MapFS{
		"migrations/0010_later.sql": file("B"),
		"migrations/0002_first.sql": file("A"),
	})
	require.NoError(t, err)
	require.Equal(t, []store.Migration{{Version: 2, Name: "0002_first.sql", SQL: "A"}, {Version: 10, Name: "0010_later.sql", SQL: "B"}}, got)

	for _, bad := range []fstest.MapFS{
		{"migrations/first.sql": file("")},
		{"migrations/0000_zero.sql": file("")},
		{"migrations/0001_x.txt": file("")},
		{"migrations/0001_a.sql": file(""), "migrations/01_b.sql": file("")},
	} {
		_, err := store.ReadMigrations(bad)
		require.Error(t, err, bad)
	}
}
