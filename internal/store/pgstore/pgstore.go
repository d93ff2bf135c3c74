package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/heraldhooks/herald/internal/filter"
	"github.com/heraldhooks/herald/internal/store"
)

var (
	_ store.Store  = (*Store)(nil)
	_ store.Leaser = (*Store)(nil)
)

// Store is a store.Store on PostgreSQL. It is safe for concurrent use.
type Store struct {
	pool    *pgxpool.Pool
	logger  *slog.Logger
	channel string // the NOTIFY channel of this schema
	// secrets seals endpoint secrets at rest (store.OpenOptions).
	secrets store.Secrets
	// release is the release that opened the store (migrate.go).
	release string

	// closing ends subscriptions and background vacuums when Close is
	// called.
	closing context.Context
	stop    context.CancelFunc

	mu     sync.Mutex // guards closed and subs.Add
	closed bool

	// vacuumedAt is when this node last vacuumed the queues
	// (EndpointQueueTidy, or a full claim), in unix nanoseconds of the
	// process clock.
	vacuumedAt atomic.Int64
	// queueCheckedAt is when this node last checked that the delivery
	// queue is built (queueReady), in unix nanoseconds of the process
	// clock.
	queueCheckedAt atomic.Int64
	// subs counts the subscriptions and background vacuums Close waits
	// for.
	subs sync.WaitGroup

	// groups lets overlapping EventIngest calls share transactions
	// (groupcommit.go).
	groups ingestGroups

	// lockConflicts counts the writes that met a lock and were written
	// again (LockConflicts).
	lockConflicts atomic.Int64

	// rides lets outcome writes share ingests' transactions (rides.go).
	rides rides

	// taker is this node's dispatcher, which ingests lease to
	// (leasing.go); none until SetTaker.
	taker store.TakerSlot

	// endpoints are the endpoints this node read lately for ingests,
	// which later ingests fan out from (endpointcache.go).
	endpoints endpointCache
	// filters are the endpoints' filters compiled, by source.
	filters filter.Cache

	// node names this store's rows of the activity series (activity.go).
	node string

	// generic begins the transactions that run on cached generic plans
	// (inGenericTx), and says whether DeliveryNextDue does; the zero
	// TxOptions when the URL chose plan_cache_mode itself.
	generic pgx.TxOptions

	// compress says whether ingests write payloads compressed
	// (store.StoredPayload).
	compress bool

	// listenCfg is where the wake-ups LISTEN: the pool's own server, or
	// OpenOptions.ListenURL; nil behind a transaction pooler without one
	// (Subscribe then never wakes: the dispatchers poll).
	listenCfg *pgx.ConnConfig
}

// genericSettingsSQL has the rest of a transaction run on generic plans,
// made once per connection and statement and kept (see inGenericTx), and
// never on a sequential scan: a plan made while a table is small, which
// reading a few pages whole would serve best, stays good as it grows.
const genericSettingsSQL = "SET LOCAL plan_cache_mode = force_generic_plan; SET LOCAL enable_seqscan = off"

// sessionPlansSQL undoes genericSettingsSQL for the rest of a
// transaction: the connection's own settings again.
const sessionPlansSQL = "SET LOCAL plan_cache_mode TO DEFAULT; SET LOCAL enable_seqscan TO DEFAULT"

// genericTxSQL begins a transaction with genericSettingsSQL.
const genericTxSQL = "BEGIN; " + genericSettingsSQL

// genericPlansSQL is genericSettingsSQL as one statement, for a pgx
// batch, which cannot send several in one: queued first in a batch
// outside a transaction block, it holds for the rest of the batch, which
// is one implicit transaction (SET LOCAL would warn there); queued after
// a BEGIN, for the rest of the transaction.
const genericPlansSQL = "SELECT set_config('plan_cache_mode', 'force_generic_plan', true), " +
	"set_config('enable_seqscan', 'off', true)"

// defaultConnectTimeout bounds one connection attempt to one host when the
// URL sets no connect_timeout.
const defaultConnectTimeout = 5 * time.Second

// Open connects to the database at url (a postgres:// URL or a key=value
// string; search_path picks the schema) and checks that it answers. It does
// not migrate: callers call Migrate. opts give the key that seals endpoint
// secrets (store.WithSecrets); without one they are kept plain.
func Open(ctx context.Context, url string, logger *slog.Logger, opts ...store.OpenOption) (*Store, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("open postgres: parse url: %w", err)
	}
	return openConfig(ctx, cfg, logger, opts...)
}

// openConfig is Open with the url parsed into cfg.
func openConfig(ctx context.Context, cfg *pgxpool.Config, logger *slog.Logger, opts ...store.OpenOption) (*Store, error) {
	// Plan each statement for its parameters and the tables as they are
	// now. A generic plan is fixed after a few runs, often while the queue
	// is still small; the planner then keeps sequential scans of
	// deliveries that cost tens of milliseconds once it holds millions.
	// The hot transactions that find every row by key (the claim, the
	// outcome write, ingest) run on generic plans instead, with
	// sequential scans priced out (inGenericTx). A URL that sets
	// plan_cache_mode itself wins, for every statement.
	// Bound each connection attempt, per host: with several hosts in the
	// URL (a primary and its standbys), a host that is gone without
	// refusing (its machine down, a network cut) would otherwise hold
	// every new connection for the system's TCP timeout, minutes, before
	// the next host is tried. A URL's connect_timeout wins.
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = defaultConnectTimeout
	}
	pooled, err := usePooler(cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	var generic pgx.TxOptions
	if pooled {
		// A pooler refuses startup parameters it does not know, and a
		// session setting would leak to other clients of the server
		// connection; an unnamed statement is planned for its parameters
		// anyway, and the hot transactions still ask for generic plans
		// with SET LOCAL.
		generic.BeginQuery = genericTxSQL
	} else if _, set := cfg.ConnConfig.RuntimeParams["plan_cache_mode"]; !set {
		cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_custom_plan"
		generic.BeginQuery = genericTxSQL
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	options := store.NewOpenOptions(opts...)
	schema, autovacuum, err := waitReady(ctx, pool, logger, options.ConnectWait)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	if autovacuum == "off" {
		logger.Warn("PostgreSQL's autovacuum is off: Herald vacuums its own endpoint queue, " +
			"but the deliveries, events and attempts it finishes leave dead rows that only vacuum " +
			"reclaims; set autovacuum = on in postgresql.conf (it is on by default), or run VACUUM " +
			"on them yourself")
	}
	listenCfg, err := listenConfig(cfg, pooled, options.ListenURL, logger)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	s := &Store{pool: pool, logger: logger, channel: channelName(schema),
		secrets: store.NewSecrets(options.Secrets), release: options.ReleaseName(), node: newNodeID(), generic: generic,
		listenCfg: listenCfg, compress: options.CompressPayloads}
	s.closing, s.stop = context.WithCancel(context.Background())
	return s, nil
}

// channelName names the NOTIFY channel after the schema, so installations
// in different schemas of one database do not wake each other. It stays
// within PostgreSQL's 63-byte identifier limit.
func channelName(schema *string) string {
	name := "herald_wake"
	if schema != nil && *schema != "" {
		name += "_" + *schema
	}
	if len(name) > 63 {
		name = name[:63]
	}
	return name
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping postgres: %w", err)
	}
	return nil
}

// Close ends every subscription, waits for them, and closes the pool. It is
// safe to call more than once.
func (s *Store) Close() error {
	s.mu.Lock()
	already := s.closed
	s.closed = true
	s.mu.Unlock()
	if already {
		return nil
	}
	s.stop()
	s.subs.Wait()
	s.pool.Close()
	return nil
}

// nowArg is the value for a `coalesce($n::timestamptz, now())` parameter:
// NULL for the zero time, so the database clock decides.
func nowArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// idTime is the time an id is made from: the caller's clock, or this node's.
func idTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now()
	}
	return t
}

// micros turns a duration into whole microseconds, PostgreSQL's precision.
func micros(d time.Duration) int64 {
	return d.Microseconds()
}

// utcPtr converts a nullable timestamp to UTC.
func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// notifySQL wakes the dispatchers listening on the channel $1, once the
// transaction commits.
const notifySQL = "SELECT pg_notify($1, '')"

// notify wakes the dispatchers of every node, once the transaction commits.
func (s *Store) notify(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, notifySQL, s.channel); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}

// inTx runs fn in a transaction, committing when it returns nil. Once fn
// has done its work the commit runs whatever becomes of ctx: cancelling
// the commit itself could leave the caller told "failed" about a
// transaction the database went on to commit.
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return s.runTx(ctx, pgx.TxOptions{}, fn)
}

// inGenericTx is inTx for the hot transactions whose every statement finds
// its rows by key (a primary key, an array of ids, a unique key, one
// endpoint's range of a queue index): the claim, the outcome write and
// ingest. Such a statement's best plan is the same however large the
// tables are, so it runs on a generic plan, made at its first run on a
// connection and kept, where a custom plan would be made afresh each time
// (planning took from a quarter to most of those statements' time). The
// setting is part of the BEGIN, so it costs no round trip, and it ends
// with the transaction: everything else, whose plans may depend on the
// tables' sizes, keeps custom plans. TestGenericPlans checks that each
// statement run here walks its indexes on a generic plan made with the
// tables empty and with them large. PostgreSQL makes a generic plan again
// when a table's statistics change, so one made while the tables were
// small does not outlive the next ANALYZE.
func (s *Store) inGenericTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return s.runTx(ctx, s.generic, fn)
}

// runTx is inTx with the transaction begun as opts say.
func (s *Store) runTx(ctx context.Context, opts pgx.TxOptions, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(context.WithoutCancel(ctx))
}

// isUniqueViolation reports whether err is PostgreSQL's unique_violation.
func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

// collect reads every row of rows (err is the query's) through scan, in
// order, and closes them.
func collect[T any](rows pgx.Rows, err error, scan func(pgx.Row) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (T, error) { return scan(r) })
}

// page is store.NewPage, for the lists (event.go) not yet calling it.
func page[T any](items []T, limit int, id func(T) string) *store.Page[T] {
	return store.NewPage(items, limit, id)
}
