package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	// The driver registers itself as "sqlite".
	_ "modernc.org/sqlite"

	"github.com/heraldhooks/herald/internal/store"
)

var (
	_ store.Store  = (*Store)(nil)
	_ store.Leaser = (*Store)(nil)
)

// Store is the SQLite backend. Open it, then call Migrate.
type Store struct {
	// compress says whether ingests write payloads compressed
	// (store.StoredPayload).
	compress bool
	writer   *sql.DB
	reader   *sql.DB
	// checkpointer runs the WAL checkpoints (see checkpoint), which ends
	// by closing checkpointed.
	checkpointer *sql.DB
	checkpointed chan struct{}
	// listerOnce starts the lister (list.go), which runs every listEvery
	// and ends by closing listerDone.
	listEvery  time.Duration
	listerOnce sync.Once
	listerDone chan struct{}
	logger     *slog.Logger
	// release is the release that opened the store (migrate.go).
	release string
	// secrets seals endpoint secrets at rest (store.OpenOptions).
	secrets store.Secrets

	stmtMu sync.Mutex
	stmts  *statements // see prepared

	// The ingest calls waiting for a group commit, whether a group is
	// being written (see groupIngest), and the outcome writes that ride
	// the next group (writeOutcome).
	groupMu    sync.Mutex
	groupQueue []*ingestCall
	groupBusy  bool
	groupRides []*outcomeRide
	// commits counts the write transactions committed.
	commits atomic.Int64
	// taker is this node's dispatcher, which ingest groups lease to
	// (leasing.go); none until SetTaker.
	taker store.TakerSlot
	// endpoints holds the endpoints leasing ingests read (endpointcache.go).
	endpoints endpointCache

	mu     sync.Mutex
	subs   map[chan struct{}]struct{}
	closed bool
	done   chan struct{} // closed by Close: ends the subscription watchers
}

// busyTimeout is how long a connection waits on a lock held by another
// process (a backup, the sqlite3 shell) before giving up.
const busyTimeout = 10 * time.Second

// Open opens (creating if need be) the SQLite database at path. It does not
// migrate; call Migrate before use. opts give the key that seals endpoint
// secrets (store.WithSecrets); without one they are kept plain.
func Open(ctx context.Context, path string, logger *slog.Logger, opts ...store.OpenOption) (*Store, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if path == "" || strings.ContainsAny(path, "?#") || strings.HasPrefix(path, "file:") || path == ":memory:" {
		return nil, fmt.Errorf("open sqlite: path %q must name a file (no URI, query or :memory:)", path)
	}
	pragmas := url.Values{}
	pragmas.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	pragmas.Add("_pragma", "journal_mode(WAL)")
	pragmas.Add("_pragma", "foreign_keys(1)")
	pragmas.Add("_pragma", "synchronous(FULL)")

	w := url.Values{}
	for k, v := range pragmas {
		w[k] = append([]string(nil), v...)
	}
	w.Set("_txlock", "immediate")
	// The writer keeps the hot index pages of the queue in a cache of its
	// own rather than reading them back from the file, and leaves most of
	// the checkpointing to the checkpointer (see checkpoint), off its path.
	w.Add("_pragma", fmt.Sprintf("cache_size(%d)", -writerCacheKiB))
	w.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", walFrames))
	w.Add("_pragma", fmt.Sprintf("journal_size_limit(%d)", walKeepBytes))
	// What a write frees (an endpoint's secret as it was, say) is zeroed
	// within its page, at no cost in I/O, rather than left in free space
	// where a copy of the file would still hold it.
	w.Add("_pragma", "secure_delete(FAST)")
	// A group commit written again call by call runs each call in a
	// savepoint (ingestInSavepoint), and a statement that may fail half
	// way (an insert with triggers) runs in a statement journal: each
	// copies every page it first changes to a sub-journal, kept in
	// memory, not spilled to a temporary file past 64 KiB, with a system
	// call a page.
	w.Add("_pragma", "temp_store(MEMORY)")
	writer, err := sql.Open("sqlite", path+"?"+w.Encode())
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	writer.SetConnMaxLifetime(0)
	writer.SetConnMaxIdleTime(0)
	// The writer connects first, so the file exists in WAL mode before any
	// read-only connection opens it.
	if err := writer.PingContext(ctx); err != nil {
		writer.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}

	r := url.Values{}
	for k, v := range pragmas {
		r[k] = append([]string(nil), v...)
	}
	r.Add("_pragma", "query_only(1)")
	reader, err := sql.Open("sqlite", path+"?"+r.Encode())
	if err != nil {
		writer.Close()
		return nil, fmt.Errorf("open sqlite %s for reading: %w", path, err)
	}
	readers := max(4, runtime.GOMAXPROCS(0))
	reader.SetMaxOpenConns(readers)
	reader.SetMaxIdleConns(readers)
	if err := reader.PingContext(ctx); err != nil {
		reader.Close()
		writer.Close()
		return nil, fmt.Errorf("open sqlite %s for reading: %w", path, err)
	}

	ck, err := sql.Open("sqlite", path+"?"+pragmas.Encode())
	if err != nil {
		reader.Close()
		writer.Close()
		return nil, fmt.Errorf("open sqlite %s for checkpoints: %w", path, err)
	}
	ck.SetMaxOpenConns(1)
	ck.SetMaxIdleConns(1)

	options := store.NewOpenOptions(opts...)
	s := &Store{
		writer:       writer,
		reader:       reader,
		checkpointer: ck,
		logger:       logger,
		secrets:      store.NewSecrets(options.Secrets),
		release:      options.ReleaseName(),
		compress:     options.CompressPayloads,
		subs:         map[chan struct{}]struct{}{},
		done:         make(chan struct{}),
		checkpointed: make(chan struct{}),
		listEvery:    listEvery,
		listerDone:   make(chan struct{}),
	}
	go s.checkpoint()
	return s, nil
}

// writerCacheKiB is the writer's page cache; checkpointEvery is how often
// the checkpointer copies the WAL into the database file; walFrames is
// the WAL size (in frames of a page) at which the writer checkpoints
// itself, and walKeepBytes what a WAL that starts over is cut to.
const (
	writerCacheKiB  = 16 << 10
	checkpointEvery = 200 * time.Millisecond
	walFrames       = 8192
	walKeepBytes    = 64 << 20
)

// checkpoint copies committed WAL frames into the database file, on a
// connection of its own, until Close. A passive checkpoint waits for no
// one, so the writer goes on meanwhile, on another core. Under a steady
// load the writer adds frames while each one runs, so the WAL is never
// found all copied and never starts over by itself; the writer's own
// checkpoint, once the WAL reaches walFrames, does that, and it is cheap:
// the checkpointer has already copied all but the last frames.
func (s *Store) checkpoint() {
	defer close(s.checkpointed)
	tick := time.NewTicker(checkpointEvery)
	defer tick.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
		}
		if _, err := s.checkpointer.Exec("PRAGMA wal_checkpoint(PASSIVE)"); err != nil {
			s.logger.Warn("sqlite checkpoint", "error", err)
		}
	}
}

// Ping checks that both the writer and the readers answer.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.writer.PingContext(ctx); err != nil {
		return fmt.Errorf("ping sqlite: %w", err)
	}
	if err := s.reader.PingContext(ctx); err != nil {
		return fmt.Errorf("ping sqlite readers: %w", err)
	}
	return nil
}

// Close ends every subscription and closes the database. Calling it again
// does nothing.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	for ch := range s.subs {
		close(ch)
		delete(s.subs, ch)
	}
	s.mu.Unlock()

	s.listerOnce.Do(func() { close(s.listerDone) })
	<-s.listerDone
	<-s.checkpointed
	// A last full checkpoint leaves the WAL empty, so the file alone
	// holds everything once Herald stops.
	_, ckErr := s.checkpointer.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
	if ckErr != nil {
		ckErr = fmt.Errorf("final checkpoint: %w", ckErr)
	}

	s.stmtMu.Lock()
	stmtErr := closeStatements(s.stmts)
	s.stmts = nil
	s.stmtMu.Unlock()
	return errors.Join(stmtErr, ckErr, s.checkpointer.Close(), s.reader.Close(), s.writer.Close())
}

// Subscribe returns a channel that receives a value after every commit that
// may have made deliveries due (ingest, replay, release, enable). Signals are
// in process: SQLite has one node.
func (s *Store) Subscribe(ctx context.Context) (<-chan struct{}, error) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errors.New("subscribe: store closed")
	}
	s.subs[ch] = struct{}{}
	s.mu.Unlock()

	go func() {
		select {
		case <-ctx.Done():
		case <-s.done:
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.subs[ch]; ok {
			delete(s.subs, ch)
			close(ch)
		}
	}()
	return ch, nil
}

// notify wakes every subscriber without waiting for any: a subscriber that
// has a value waiting already will look again anyway.
func (s *Store) notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// write runs fn in one write transaction (BEGIN IMMEDIATE) and commits it.
func (s *Store) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	s.commits.Add(1)
	return nil
}

// now is the time an operation runs at: the caller's Now, or the process
// clock (the database clock of a single-node store), to the microsecond.
func now(t time.Time) time.Time {
	if t.IsZero() {
		t = time.Now()
	}
	return t.UTC().Truncate(time.Microsecond)
}

// micros is how a time is stored.
func micros(t time.Time) int64 { return t.UnixMicro() }

// fromMicros reads a stored time.
func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// nullMicros stores an optional time.
func nullMicros(t *time.Time) sql.NullInt64 {
	if t == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: micros(*t), Valid: true}
}

// fromNullMicros reads an optional time.
func fromNullMicros(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMicros(v.Int64)
	return &t
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface {
	Scan(dest ...any) error
}

// collect reads every row of rows (err is the query's) through scan, in
// order, and closes them.
func collect[T any](rows *sql.Rows, err error, scan func(scanner) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// where builds an AND of conditions with their arguments.
type where struct {
	conds []string
	args  []any
}

func (w *where) add(cond string, args ...any) {
	w.conds = append(w.conds, cond)
	w.args = append(w.args, args...)
}

func (w *where) String() string {
	if len(w.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(w.conds, " AND ")
}
