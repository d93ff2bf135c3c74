package pgstore

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/testdb"
)

// front stands between Open and the test's PostgreSQL: its first refuse
// connections are answered with the error refusal, as a PostgreSQL that
// is starting answers (57P03), and later ones are passed through.
type front struct {
	ln      net.Listener
	target  string
	refuse  int64
	refusal *pgproto3.ErrorResponse
	conns   atomic.Int64
	wg      sync.WaitGroup
}

// newFront listens on addr ("127.0.0.1:0" for any port) in front of the
// PostgreSQL of url.
func newFront(t *testing.T, addr, pgURL string, refuse int64, refusal *pgproto3.ErrorResponse) *front {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	u, err := url.Parse(pgURL)
	require.NoError(t, err)
	f := &front{ln: ln, target: u.Host, refuse: refuse, refusal: refusal}
	f.wg.Go(f.serve)
	t.Cleanup(func() {
		ln.Close()
		f.wg.Wait()
	})
	return f
}

func (f *front) serve() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		n := f.conns.Add(1)
		f.wg.Go(func() {
			defer c.Close()
			if n <= f.refuse {
				f.refuseConn(c)
				return
			}
			f.pass(c)
		})
	}
}

// refuseConn reads the startup message and answers it with the refusal.
func (f *front) refuseConn(c net.Conn) {
	be := pgproto3.NewBackend(c, c)
	msg, err := be.ReceiveStartupMessage()
	if err != nil {
		return
	}
	if _, ok := msg.(*pgproto3.SSLRequest); ok {
		if _, err := c.Write([]byte("N")); err != nil {
			return
		}
		if _, err := be.ReceiveStartupMessage(); err != nil {
			return
		}
	}
	be.Send(f.refusal)
	_ = be.Flush()
}

// pass copies bytes both ways between c and the real PostgreSQL.
func (f *front) pass(c net.Conn) {
	pg, err := net.Dial("tcp", f.target)
	if err != nil {
		return
	}
	defer pg.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(pg, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, pg); done <- struct{}{} }()
	<-done
}

// through is pgURL with its host replaced by addr.
func through(t *testing.T, pgURL, addr string) string {
	t.Helper()
	u, err := url.Parse(pgURL)
	require.NoError(t, err)
	u.Host = addr
	return u.String()
}

// warnings counts the warnings logged, and signals each on seen.
type warnings struct {
	n    atomic.Int64
	seen chan struct{}
}

func (w *warnings) Enabled(context.Context, slog.Level) bool { return true }
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler       { return w }
func (w *warnings) WithGroup(string) slog.Handler            { return w }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn && r.Message == "PostgreSQL is not accepting connections yet; trying again" {
		w.n.Add(1)
		select {
		case w.seen <- struct{}{}:
		default:
		}
	}
	return nil
}

var startingUp = &pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P03",
	Message: "the database system is not yet accepting connections"}

// TestOpenWaitsForADatabaseStartingUp: a node started while its database
// is still starting (or restarting) waits for it, saying so, rather than
// exiting.
func TestOpenWaitsForADatabaseStartingUp(t *testing.T) {
	t.Parallel()
	pgURL := testdb.PostgresURL(t)
	f := newFront(t, "127.0.0.1:0", pgURL, 3, startingUp)
	w := &warnings{seen: make(chan struct{}, 1)}
	s, err := Open(t.Context(), through(t, pgURL, f.ln.Addr().String()), slog.New(w),
		store.WithConnectWait(time.Minute))
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Ping(t.Context()))
	assert.EqualValues(t, 3, w.n.Load(), "each refused try is logged")
	assert.GreaterOrEqual(t, f.conns.Load(), int64(4))
}

// TestOpenWaitsWhileNothingListens: nothing listens on the database's
// address at first (the server not up yet); Open keeps trying until it is.
func TestOpenWaitsWhileNothingListens(t *testing.T) {
	t.Parallel()
	pgURL := testdb.PostgresURL(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	w := &warnings{seen: make(chan struct{}, 1)}
	type result struct {
		s   *Store
		err error
	}
	opened := make(chan result, 1)
	go func() {
		s, err := Open(t.Context(), through(t, pgURL, addr), slog.New(w), store.WithConnectWait(time.Minute))
		opened <- result{s, err}
	}()
	select {
	case <-w.seen: // refused: nothing listens
	case r := <-opened:
		t.Fatalf("Open gave up while nothing listened, without waiting: %v", r.err)
	}
	newFront(t, addr, pgURL, 0, nil)
	r := <-opened
	require.NoError(t, r.err)
	defer r.s.Close()
	require.NoError(t, r.s.Ping(t.Context()))
	assert.GreaterOrEqual(t, w.n.Load(), int64(1))
}

// TestOpenDoesNotWaitOnWhatWaitingCannotMend: a refused password or a
// database that does not exist fails on the first try, however long the
// wait; and a database that stays unready fails once the wait is over,
// saying how long it tried.
func TestOpenDoesNotWaitOnWhatWaitingCannotMend(t *testing.T) {
	t.Parallel()
	pgURL := testdb.PostgresURL(t)
	for _, tc := range []struct {
		name string
		code string
	}{
		{"PasswordRefused", "28P01"},
		{"NoSuchDatabase", "3D000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFront(t, "127.0.0.1:0", pgURL, 1<<30, &pgproto3.ErrorResponse{
				Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: tc.code, Message: "refused by the test"})
			w := &warnings{seen: make(chan struct{}, 1)}
			_, err := Open(t.Context(), through(t, pgURL, f.ln.Addr().String()), slog.New(w),
				store.WithConnectWait(time.Hour))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.code)
			assert.Zero(t, w.n.Load(), "not tried again")
		})
	}
	t.Run("StaysUnready", func(t *testing.T) {
		t.Parallel()
		f := newFront(t, "127.0.0.1:0", pgURL, 1<<30, startingUp)
		w := &warnings{seen: make(chan struct{}, 1)}
		_, err := Open(t.Context(), through(t, pgURL, f.ln.Addr().String()), slog.New(w),
			store.WithConnectWait(500*time.Millisecond))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "gave up after")
		assert.Contains(t, err.Error(), "57P03")
		assert.GreaterOrEqual(t, w.n.Load(), int64(1))
	})
	t.Run("NoWaitTriesOnce", func(t *testing.T) {
		t.Parallel()
		f := newFront(t, "127.0.0.1:0", pgURL, 1<<30, startingUp)
		w := &warnings{seen: make(chan struct{}, 1)}
		_, err := Open(t.Context(), through(t, pgURL, f.ln.Addr().String()), slog.New(w))
		require.Error(t, err)
		assert.Zero(t, w.n.Load())
		assert.EqualValues(t, 1, f.conns.Load())
	})
	t.Run("Cancelled", func(t *testing.T) {
		t.Parallel()
		f := newFront(t, "127.0.0.1:0", pgURL, 1<<30, startingUp)
		w := &warnings{seen: make(chan struct{}, 1)}
		ctx, cancel := context.WithCancel(t.Context())
		go func() { <-w.seen; cancel() }()
		_, err := Open(ctx, through(t, pgURL, f.ln.Addr().String()), slog.New(w), store.WithConnectWait(time.Hour))
		require.Error(t, err)
		assert.True(t, errors.Is(err, context.Canceled), "%v", err)
	})
}

// TestOpenSkipsAHostThatNeverAnswers: the first host of a multi-host URL
// accepts connections and never answers (a primary whose machine is gone,
// behind a balancer); Open moves on to the next host within
// defaultConnectTimeout rather than the system's TCP timeout.
func TestOpenSkipsAHostThatNeverAnswers(t *testing.T) {
	t.Parallel()
	pgURL := testdb.PostgresURL(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var held sync.WaitGroup
	done := make(chan struct{})
	held.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held.Go(func() {
				defer c.Close()
				<-done
			})
		}
	})
	t.Cleanup(func() {
		close(done)
		ln.Close()
		held.Wait()
	})
	u, err := url.Parse(pgURL)
	require.NoError(t, err)
	u.Host = ln.Addr().String() + "," + u.Host
	q := u.Query()
	q.Set("target_session_attrs", "read-write")
	u.RawQuery = q.Encode()

	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 3*defaultConnectTimeout)
	defer cancel()
	s, err := Open(ctx, u.String(), nil)
	require.NoError(t, err)
	defer s.Close()
	require.Less(t, time.Since(start), 2*defaultConnectTimeout)
	require.NoError(t, s.Ping(t.Context()))
}
