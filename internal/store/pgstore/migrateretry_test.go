package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// TestMigrationRetriesADeadlock: a migration that deadlocks with a node
// running beside it (seen in TestRollingUpgrade: 0027's ALTER of
// endpoints and its foreign key onto events against an ingest) is tried
// again, up to migrateTries times; any other error ends it at once.
func TestMigrationRetriesADeadlock(t *testing.T) {
	t.Parallel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	deadlock := fmt.Errorf("apply: %w", &pgconn.PgError{Code: "40P01", Message: "deadlock detected"})

	calls := 0
	err := retryDeadlocks(context.Background(), logger, "0027_x.sql", func() error {
		calls++
		if calls < 3 {
			return deadlock
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 3, calls, "two deadlocks, then applied")

	calls = 0
	err = retryDeadlocks(context.Background(), logger, "0027_x.sql", func() error { calls++; return deadlock })
	require.ErrorIs(t, err, deadlock)
	require.Equal(t, migrateTries, calls, "gives up after migrateTries")

	calls = 0
	other := errors.New("syntax error")
	err = retryDeadlocks(context.Background(), logger, "0027_x.sql", func() error { calls++; return other })
	require.ErrorIs(t, err, other)
	require.Equal(t, 1, calls, "other errors are not tried again")
}
