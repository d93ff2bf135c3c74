package pgstore

import (
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// poolerParam is the URL setting that says the URL goes through a
// transaction pooler (PgBouncer's pool_mode = transaction, a cloud proxy):
// postgres://host:6432/herald?pooler=transaction. Herald then keeps no
// session state across transactions: no named prepared statements (each
// statement is parsed anew with its parameters, its description cached per
// connection), no startup parameters but the pooler's own, settings only
// with SET LOCAL, advisory locks only for a transaction, and the wake-ups
// (LISTEN, which needs a session) on OpenOptions.ListenURL, or none (the
// dispatchers poll).
const poolerParam = "pooler"

// usePooler reads and removes the pooler setting from cfg (it is Herald's,
// not a startup parameter for the server) and, when it says transaction,
// sets cfg up for a transaction pooler. It reports whether it did.
func usePooler(cfg *pgxpool.Config) (bool, error) {
	mode, set := cfg.ConnConfig.RuntimeParams[poolerParam]
	if !set {
		return false, nil
	}
	delete(cfg.ConnConfig.RuntimeParams, poolerParam)
	switch mode {
	case "transaction":
	case "none", "":
		return false, nil
	default:
		return false, fmt.Errorf("%s=%q: want transaction (or none)", poolerParam, mode)
	}
	// Named prepared statements live in one server session, which a
	// transaction pooler hands to another client after each transaction
	// (PgBouncer before 1.21, Debian 12's 1.18 among them, cannot track
	// them). The unnamed statement is parsed, bound and run in one
	// exchange, so it never outlives the server connection it ran on.
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	return true, nil
}

// listenConfig is where the wake-ups connect: listenURL when given (a
// direct URL, since LISTEN needs a session of its own), the pool's server
// when it is direct, and nowhere behind a transaction pooler without one,
// which it warns of.
func listenConfig(cfg *pgxpool.Config, pooled bool, listenURL string, logger *slog.Logger) (*pgx.ConnConfig, error) {
	if listenURL != "" {
		lc, err := pgx.ParseConfig(listenURL)
		if err != nil {
			return nil, fmt.Errorf("parse listen url: %w", err)
		}
		delete(lc.RuntimeParams, poolerParam)
		if lc.ConnectTimeout == 0 {
			lc.ConnectTimeout = defaultConnectTimeout
		}
		return lc, nil
	}
	if pooled {
		logger.Warn("the database URL goes through a transaction pooler (pooler=transaction), " +
			"which cannot hold a LISTEN: dispatchers poll for new work every --poll-interval; " +
			"give --db-listen-url (HERALD_DB_LISTEN_URL), a direct URL to the same database, " +
			"for wake-ups at once")
		return nil, nil
	}
	return cfg.ConnConfig.Copy(), nil
}
