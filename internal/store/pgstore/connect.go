package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Backoff between the tries of waitReady: the first retry comes soon, for
// a database that is just finishing its start, and later ones no oftener
// than connectBackoffMax.
const (
	connectBackoffMin = 100 * time.Millisecond
	connectBackoffMax = 2 * time.Second
)

// waitReady runs the first query of Open, current_schema() and the
// autovacuum setting, trying again while the database is not accepting
// connections yet (see transientConnectError) until wait has passed since
// the first try. Each failed try is logged with how long it has waited, so
// a node that starts before its database says what it is waiting for.
func waitReady(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger, wait time.Duration) (schema *string, autovacuum string, err error) {
	start := time.Now()
	backoff := connectBackoffMin
	for try := 1; ; try++ {
		err = pool.QueryRow(ctx, "SELECT current_schema(), current_setting('autovacuum')").Scan(&schema, &autovacuum)
		if err == nil {
			if try > 1 {
				logger.Info("PostgreSQL accepts connections", "tries", try, "waited", time.Since(start).Round(time.Millisecond))
			}
			return schema, autovacuum, nil
		}
		waited := time.Since(start)
		if !transientConnectError(err) || waited+backoff > wait || ctx.Err() != nil {
			if try > 1 {
				return nil, "", fmt.Errorf("gave up after %d tries in %s: %w", try, waited.Round(time.Millisecond), err)
			}
			return nil, "", err
		}
		logger.Warn("PostgreSQL is not accepting connections yet; trying again",
			"error", err, "try", try, "waited", waited.Round(time.Millisecond), "wait", wait)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, "", fmt.Errorf("waiting for PostgreSQL: %w (last error: %w)", ctx.Err(), err)
		case <-t.C:
		}
		backoff = min(2*backoff, connectBackoffMax)
	}
}

// transientConnectError reports whether err, from a first query, may pass
// by waiting: the server is starting, shutting down or restarting
// (cannot_connect_now, admin_shutdown, crash_shutdown), out of connection
// slots, the connection failed or broke, or nothing listens yet. Errors
// that waiting cannot mend, such as a refused password or a database that
// does not exist, are not.
func transientConnectError(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "57P03", // cannot_connect_now: starting up, or in recovery
			"57P01", "57P02", // admin_shutdown, crash_shutdown
			"53300": // too_many_connections
			return true
		}
		return len(pgErr.Code) == 5 && pgErr.Code[:2] == "08" // connection_exception
	}
	var netErr net.Error
	var opErr *net.OpError
	var dnsErr *net.DNSError
	return errors.As(err, &netErr) || errors.As(err, &opErr) || errors.As(err, &dnsErr) ||
		pgconn.SafeToRetry(err)
}
