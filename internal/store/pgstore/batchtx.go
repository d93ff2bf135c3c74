package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// queryer is what a transaction's statements are sent on: a pgx.Tx, a
// pooled connection whose transaction the caller's statements begin and
// end (ingestAlone), or a batchTx.
type queryer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// batchTx is a transaction on one pooled connection that costs no round
// trips of its own: its BEGIN, with the generic plan settings of
// inGenericTx, goes out in the batch of its first statements, and its
// COMMIT in the batch of its last (commit), which may also carry writes
// whose results nobody reads. A pgx transaction takes one round trip for
// each; the claim and the outcome write, a few statements each, run many
// times a second at low rates, where each round trip costs this process
// and the database's backend more than the statement it carries.
//
// A statement that fails makes the rest of its batch, a COMMIT included,
// be skipped; end then rolls the transaction back, so that the connection
// goes back to the pool idle (should that fail too, the pool closes the
// connection rather than keep one inside a transaction).
type batchTx struct {
	conn *pgxpool.Conn
	// begin holds the statements to send before the first one, until
	// they are sent.
	begin []string
	// riders are an outcome write's statements that this transaction
	// carries (rides.go), sent after begin, until they are sent.
	riders []*pgx.QueuedQuery
}

// beginBatched acquires a connection for a batchTx on generic plans, as
// inGenericTx's transactions are. Its caller must call end.
func (s *Store) beginBatched(ctx context.Context) (*batchTx, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	t := &batchTx{conn: conn, begin: []string{"BEGIN"}}
	if s.generic.BeginQuery != "" {
		t.begin = append(t.begin, genericPlansSQL)
	}
	return t, nil
}

// SendBatch sends b, after the BEGIN (and the statements carried) if
// that has not gone yet: the results read are b's own.
func (t *batchTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if len(t.begin) == 0 {
		return t.conn.SendBatch(ctx, b)
	}
	first := &pgx.Batch{}
	for _, sql := range t.begin {
		first.Queue(sql)
	}
	first.QueuedQueries = append(first.QueuedQueries, t.riders...)
	skip := len(first.QueuedQueries)
	first.QueuedQueries = append(first.QueuedQueries, b.QueuedQueries...)
	t.begin, t.riders = nil, nil
	return &begunResults{BatchResults: t.conn.SendBatch(ctx, first), skip: skip}
}

// sendOne sends one statement in a batch, after the BEGIN.
func (t *batchTx) sendOne(ctx context.Context, sql string, args []any) pgx.BatchResults {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	return t.SendBatch(ctx, b)
}

// Query runs one statement, with the BEGIN if that has not gone yet.
func (t *batchTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if len(t.begin) == 0 {
		return t.conn.Query(ctx, sql, args...)
	}
	br := t.sendOne(ctx, sql, args)
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// QueryRow is Query for one row.
func (t *batchTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if len(t.begin) == 0 {
		return t.conn.QueryRow(ctx, sql, args...)
	}
	rows, err := t.Query(ctx, sql, args...)
	return firstRow{rows: rows, err: err}
}

// Exec runs one statement, with the BEGIN if that has not gone yet.
func (t *batchTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if len(t.begin) == 0 {
		return t.conn.Exec(ctx, sql, args...)
	}
	br := t.sendOne(ctx, sql, args)
	tag, err := br.Exec()
	if closeErr := br.Close(); err == nil {
		err = closeErr
	}
	return tag, err
}

// commit sends the statements of later (none if nil), then COMMIT, in
// one batch, and reads their results (with the function each was queued
// with, if any: QueuedQuery.Query, which keeps its own error: the
// COMMIT's answer decides). Once sent, the batch runs whatever
// becomes of ctx, as inTx's commit does: cancelled, it could leave the
// caller told "failed" about a transaction the database went on to
// commit. A COMMIT that fails, or rolled back (the transaction had
// failed), is an errCommit, told apart from the failure of a statement
// of later; one answered COMMIT is success, even if the connection then
// fails before the end of the batch is read (end gives the pool a
// broken connection, which it drops).
func (t *batchTx) commit(ctx context.Context, later *pgx.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if later == nil {
		later = &pgx.Batch{}
	}
	later.Queue("COMMIT")
	br := t.SendBatch(context.WithoutCancel(ctx), later)
	committed := false
	err := func() error {
		for _, qq := range later.QueuedQueries[:later.Len()-1] {
			if qq.Fn != nil {
				// A statement whose answer is read. An error of the
				// reading alone (the statement ran) leaves the COMMIT
				// to say whether the transaction is kept; one of the
				// statement also fails the COMMIT.
				_ = qq.Fn(br)
				continue
			}
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		tag, err := br.Exec()
		if err != nil {
			return errCommit{err}
		}
		if tag.String() != "COMMIT" {
			return errCommit{pgx.ErrTxCommitRollback}
		}
		committed = true
		return nil
	}()
	if closeErr := br.Close(); err == nil && !committed {
		err = closeErr
	}
	return err
}

// end rolls back what commit did not end and gives the connection back.
func (t *batchTx) end(ctx context.Context) {
	if len(t.begin) == 0 && t.conn.Conn().PgConn().TxStatus() != 'I' {
		_, _ = t.conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
	}
	t.conn.Release()
}

// begunResults are a batch's results with those of the BEGIN statements
// sent before it skipped.
type begunResults struct {
	pgx.BatchResults
	skip int
}

// skipBegin reads the BEGIN statements' results, once.
func (r *begunResults) skipBegin() error {
	for ; r.skip > 0; r.skip-- {
		if _, err := r.BatchResults.Exec(); err != nil {
			r.skip = 0
			return fmt.Errorf("begin: %w", err)
		}
	}
	return nil
}

func (r *begunResults) Exec() (pgconn.CommandTag, error) {
	if err := r.skipBegin(); err != nil {
		return pgconn.CommandTag{}, err
	}
	return r.BatchResults.Exec()
}

func (r *begunResults) Query() (pgx.Rows, error) {
	if err := r.skipBegin(); err != nil {
		// Rows, not nil: a QueuedQuery's Query reads the rows whatever
		// the error.
		return errRows{err}, err
	}
	return r.BatchResults.Query()
}

func (r *begunResults) QueryRow() pgx.Row {
	if err := r.skipBegin(); err != nil {
		return firstRow{err: err}
	}
	return r.BatchResults.QueryRow()
}

// batchRows are the rows of a batch's one statement: closing them closes
// the batch.
type batchRows struct {
	pgx.Rows
	br       pgx.BatchResults
	closeErr error
	closed   bool
}

func (r *batchRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	r.closeErr = r.br.Close()
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.closeErr
}

// firstRow is the first row of rows, or err, as pgx.Row.
type firstRow struct {
	rows pgx.Rows
	err  error
}

func (r firstRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	if err := r.rows.Err(); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	return nil
}

// sendQueued sends the statements of b on q, if any, and reads their
// results.
func sendQueued(ctx context.Context, q queryer, b *pgx.Batch) error {
	if b.Len() == 0 {
		return nil
	}
	br := q.SendBatch(ctx, b)
	var err error
	for range b.Len() {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	if closeErr := br.Close(); err == nil {
		err = closeErr
	}
	return err
}

// errCommit is the failure of a COMMIT sent in a batch with other
// statements, told apart from theirs: none of the transaction is kept,
// whatever its statements were.
type errCommit struct{ err error }

func (e errCommit) Error() string { return "commit: " + e.err.Error() }
func (e errCommit) Unwrap() error { return e.err }

// errAfterCommit is the failure of a read that follows a COMMIT that
// succeeded (an ingest's events whose idempotency keys were taken): the
// transaction is kept, and must not be written again.
type errAfterCommit struct{ err error }

func (e errAfterCommit) Error() string { return "after commit: " + e.err.Error() }
func (e errAfterCommit) Unwrap() error { return e.err }

// errRows are the rows of a statement that failed with err before it ran.
type errRows struct{ err error }

func (r errRows) Close()                                       {}
func (r errRows) Err() error                                   { return r.err }
func (r errRows) CommandTag() pgconn.CommandTag                { return pgconn.CommandTag{} }
func (r errRows) FieldDescriptions() []pgconn.FieldDescription { return nil }
func (r errRows) Next() bool                                   { return false }
func (r errRows) Scan(...any) error                            { return r.err }
func (r errRows) Values() ([]any, error)                       { return nil, r.err }
func (r errRows) RawValues() [][]byte                          { return nil }
func (r errRows) Conn() *pgx.Conn                              { return nil }
func (r errRows) TypeMap() *pgtype.Map                         { return nil }
