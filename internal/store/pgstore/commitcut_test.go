package pgstore

import (
	"bufio"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/store/storetest"
)

// commitCutter is a TCP proxy to the test database that, once armed,
// drops a connection just after the server's answer to a COMMIT and
// before the ReadyForQuery that ends its batch: the transaction is kept,
// and the client reads that it committed, then finds the connection gone.
//
// Held instead, it keeps each batch's answer until the ReadyForQuery that
// ends it, and drops the connection with the whole answer of a batch that
// holds a COMMIT: the transaction is kept, and the client reads nothing
// of the batch, not even that its first statement ran.
type commitCutter struct {
	armed, held atomic.Bool
	cuts        atomic.Int32
}

// openCut opens a store whose connections go through a commitCutter.
func openCut(t *testing.T) (*Store, *commitCutter) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(migrated.URL(t))
	require.NoError(t, err)
	target := net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	p := &commitCutter{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c, target)
		}
	}()
	cfg.ConnConfig.Host = "127.0.0.1"
	cfg.ConnConfig.Port = uint16(ln.Addr().(*net.TCPAddr).Port)
	cfg.ConnConfig.Fallbacks = nil
	s, err := openConfig(t.Context(), cfg, slog.New(slog.DiscardHandler), store.WithSecrets(storetest.Ring(t)))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	require.NoError(t, s.Migrate(t.Context()))
	return s, p
}

// serve forwards client's bytes to the server as they come, and the
// server's a message at a time, until a COMMIT's answer when armed.
func (p *commitCutter) serve(client net.Conn, target string) {
	defer func() { _ = client.Close() }()
	server, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer func() { _ = server.Close() }()
	go func() { _, _ = io.Copy(server, client) }()
	r := bufio.NewReader(server)
	var answer [][]byte // a held batch's answer so far
	for {
		var head [5]byte
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return
		}
		msg := make([]byte, 1+binary.BigEndian.Uint32(head[1:]))
		copy(msg, head[:])
		if _, err := io.ReadFull(r, msg[5:]); err != nil {
			return
		}
		commit := head[0] == 'C' && string(msg[5:]) == "COMMIT\x00"
		if p.held.Load() || len(answer) > 0 {
			answer = append(answer, msg)
			if commit && p.held.CompareAndSwap(true, false) {
				p.cuts.Add(1)
				return
			}
			if head[0] != 'Z' {
				continue
			}
			for _, m := range answer {
				if _, err := client.Write(m); err != nil {
					return
				}
			}
			answer = nil
			continue
		}
		if _, err := client.Write(msg); err != nil {
			return
		}
		if commit && p.armed.CompareAndSwap(true, false) {
			p.cuts.Add(1)
			return
		}
	}
}

// unkeyed is event(payload) without an idempotency key.
func unkeyed(payload string) store.EventIngestItem {
	e := event(payload)
	e.IdempotencyKey = ""
	return e
}

// TestCommitAnsweredThenConnectionLost: once the database has answered a
// batch's COMMIT, the transaction is kept, whatever becomes of the
// connection before the batch's end is read. The caller is answered
// success: a group of ingest calls is not written a second time call by
// call (which made a second event of a call without an idempotency key,
// and answered one with a key a duplicate of its own event), and a claim
// or an outcome write is not reported failed with its leases or its
// outcome kept. When the whole answer of the batch that committed is lost,
// the calls of a group are told an error, not written again.
func TestCommitAnsweredThenConnectionLost(t *testing.T) {
	t.Parallel()

	t.Run("IngestGroup", func(t *testing.T) {
		t.Parallel()
		s, cut := openCut(t)
		g := setupGroupsOn(t, s)
		ctx := t.Context()
		f, calls := g.queueBehind(t, event("a"), unkeyed("b"))
		cut.armed.Store(true)
		g.letGo()
		a, b := recv(t, calls[0]), recv(t, calls[1])
		require.EqualValues(t, 1, cut.cuts.Load(), "the group's COMMIT was answered, then the connection cut")
		require.NoError(t, a.err)
		require.NoError(t, b.err)
		page, err := s.EventList(ctx, &store.EventListParams{ConsumerID: "c"})
		require.NoError(t, err)
		var ids []string
		for _, ev := range page.Items {
			ids = append(ids, ev.ID)
		}
		require.ElementsMatch(t, []string{f.res[0].Event.ID, a.res[0].Event.ID, b.res[0].Event.ID}, ids,
			"each call's event, once")
		require.False(t, a.res[0].Duplicate, "the call's own event")
	})

	t.Run("IngestGroupAnswerLost", func(t *testing.T) {
		// The connection is lost with the whole answer of the batch that
		// committed: the calls cannot tell whether their events were
		// written, and are told so, an error each. The group is not
		// written again call by call, which would make a second event of a
		// call without an idempotency key.
		t.Parallel()
		s, cut := openCut(t)
		g := setupGroupsOn(t, s)
		ctx := t.Context()
		_, calls := g.queueBehind(t, event("a"), unkeyed("b"))
		cut.held.Store(true)
		g.letGo()
		a, b := recv(t, calls[0]), recv(t, calls[1])
		require.EqualValues(t, 1, cut.cuts.Load(), "the group's COMMIT ran, its answer was lost")
		require.Error(t, a.err)
		require.Error(t, b.err)
		page, err := s.EventList(ctx, &store.EventListParams{ConsumerID: "c"})
		require.NoError(t, err)
		var payloads []string
		for _, ev := range page.Items {
			payloads = append(payloads, string(ev.Payload))
		}
		require.ElementsMatch(t, []string{`{"k":"first"}`, `{"k":"a"}`, `{"k":"b"}`}, payloads,
			"each call's event once, as the database committed it")
	})

	t.Run("ClaimAndOutcome", func(t *testing.T) {
		t.Parallel()
		s, cut := openCut(t)
		ctx := t.Context()
		createEndpoint(t, s, "c")
		ingest(t, s, "c", 1)
		now := t0.Add(time.Second)
		cut.armed.Store(true)
		got, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{Limit: 10, LeaseMargin: time.Minute, Now: now})
		require.EqualValues(t, 1, cut.cuts.Load())
		require.NoError(t, err, "the lease was committed")
		require.Len(t, got, 1)
		d, err := s.DeliveryGet(ctx, got[0].Delivery.ID)
		require.NoError(t, err)
		require.Equal(t, herald.StatusDelivering, d.Status)

		cut.armed.Store(true)
		applied, err := s.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{
			Outcomes: []store.DeliveryOutcome{outcomeAt(got[0], herald.StatusDelivered, now)}, Now: now,
		})
		require.EqualValues(t, 2, cut.cuts.Load())
		require.NoError(t, err, "the outcome was committed")
		require.Equal(t, []bool{true}, applied)
		d, err = s.DeliveryGet(ctx, got[0].Delivery.ID)
		require.NoError(t, err)
		require.Equal(t, herald.StatusDelivered, d.Status)
	})
}
