package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/heraldhooks/herald/internal/filter"
)

// statements are the queries of the hot paths (claim, complete, ingest),
// compiled once on the writer connection and bound to each transaction
// with Tx.StmtContext, which reuses the compiled statement on that same
// connection: SQLite takes longer to compile the claim's queries than to
// run them.
type statements struct {
	// claims
	candidates, take, head, lease, spendBucket *sql.Stmt
	// outcomes
	logAttempt, apply, window, healthTarget, writeHealth *sql.Stmt
	// ingest
	findKey, listRefs, insertEvent, insertDelivery, fanOut, seqRead, seqWrite *sql.Stmt
	// ingest that may lease (leasing.go)
	fanOutWhole, room, endpointsVersion *sql.Stmt
	// compress says whether ingests write payloads compressed
	// (store.StoredPayload), as the store was opened.
	compress bool
	// filters are the endpoints' filters compiled, by source: not a
	// statement, but, like them, made once for every ingest to use.
	filters filter.Cache
}

// prepared returns the compiled statements, compiling them on first use.
// It must be called outside a write transaction: compiling takes the
// writer connection. A failure (say, before Migrate) is not kept; the next
// call tries again.
func (s *Store) prepared(ctx context.Context) (*statements, error) {
	s.stmtMu.Lock()
	defer s.stmtMu.Unlock()
	if s.stmts != nil {
		return s.stmts, nil
	}
	st := &statements{compress: s.compress}
	list := []struct {
		into  **sql.Stmt
		query string
	}{
		{&st.candidates, candidatesQuery},
		{&st.take, takeQuery},
		{&st.head, headQuery},
		{&st.lease, leaseQuery},
		{&st.spendBucket, `UPDATE endpoints SET bucket_tokens = ?, bucket_at = ? WHERE id = ?`},
		{&st.logAttempt, logAttemptQuery},
		{&st.apply, applyQuery},
		{&st.window, windowQuery},
		{&st.healthTarget, healthTargetQuery},
		{&st.writeHealth, writeHealthQuery},
		{&st.findKey, findKeyQuery},
		{&st.listRefs, listRefsQuery},
		{&st.insertEvent, insertEventQuery},
		{&st.insertDelivery, insertDeliveryQuery},
		{&st.fanOut, fanOutQuery},
		{&st.fanOutWhole, fanOutWholeQuery},
		{&st.room, roomQuery},
		{&st.endpointsVersion, endpointsVersionQuery},
		{&st.seqRead, `SELECT value FROM sequences WHERE name = 'delivery_seq'`},
		{&st.seqWrite, `UPDATE sequences SET value = ? WHERE name = 'delivery_seq'`},
	}
	for _, q := range list {
		stmt, err := s.writer.PrepareContext(ctx, q.query)
		if err != nil {
			closeStatements(st)
			return nil, fmt.Errorf("prepare statements: %w", err)
		}
		*q.into = stmt
	}
	s.stmts = st
	return st, nil
}

// closeStatements closes every statement of st that was prepared.
func closeStatements(st *statements) error {
	if st == nil {
		return nil
	}
	var errs []error
	for _, stmt := range []*sql.Stmt{
		st.candidates, st.take, st.head, st.lease, st.spendBucket,
		st.logAttempt, st.apply, st.window, st.healthTarget, st.writeHealth,
		st.findKey, st.listRefs, st.insertEvent, st.insertDelivery, st.fanOut, st.seqRead, st.seqWrite,
		st.fanOutWhole, st.room, st.endpointsVersion,
	} {
		if stmt != nil {
			errs = append(errs, stmt.Close())
		}
	}
	return errors.Join(errs...)
}
