package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhooks/herald/internal/logkey"
)

// Reconnect backoff of a subscription whose connection dropped.
const (
	listenBackoffMin = 100 * time.Millisecond
	listenBackoffMax = 5 * time.Second
)

// errClosed is returned by Subscribe on a closed store.
var errClosed = errors.New("store is closed")

// Subscribe listens on this schema's channel on a connection of its own
// and returns a channel that receives a value whenever another caller, on
// any node, may have made deliveries due. Values coalesce (the channel
// holds one), and a reconnect after a dropped connection sends one too,
// since notifications may have been missed meanwhile. When Subscribe
// returns, the LISTEN is in place. The channel is closed when ctx ends or
// the store is closed.
func (s *Store) Subscribe(ctx context.Context) (<-chan struct{}, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("subscribe: %w", errClosed)
	}
	s.subs.Add(1) // under mu, so Close waits for this subscription
	s.mu.Unlock()

	ctx, cancel := context.WithCancel(ctx)
	stopOnClose := context.AfterFunc(s.closing, cancel)
	if s.listenCfg == nil {
		// Behind a transaction pooler with no direct URL to LISTEN on
		// (Open warned): nothing wakes the dispatchers; they poll.
		wake := make(chan struct{}, 1)
		go func() {
			defer s.subs.Done()
			defer cancel()
			defer stopOnClose()
			defer close(wake)
			<-ctx.Done()
		}()
		return wake, nil
	}
	conn, err := s.listen(ctx)
	if err != nil {
		stopOnClose()
		cancel()
		s.subs.Done()
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	wake := make(chan struct{}, 1)
	go func() {
		defer s.subs.Done()
		defer cancel()
		defer stopOnClose()
		defer close(wake)
		s.forward(ctx, conn, wake)
	}()
	return wake, nil
}

// listen opens a connection outside the pool and runs LISTEN on it.
func (s *Store) listen(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, s.listenCfg.Copy())
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		closeConn(conn)
		return nil, fmt.Errorf("listen: %w", err)
	}
	return conn, nil
}

// closeConn closes a listening connection, bounded in time.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

// forward sends a value on wake for each notification until ctx ends,
// reconnecting with a backoff when the connection drops.
func (s *Store) forward(ctx context.Context, conn *pgx.Conn, wake chan<- struct{}) {
	signal := func() {
		select {
		case wake <- struct{}{}:
		default: // one value pending already says "look again"
		}
	}
	for {
		_, err := conn.WaitForNotification(ctx)
		if err == nil {
			signal()
			continue
		}
		closeConn(conn)
		if ctx.Err() != nil {
			return
		}
		s.logger.Warn("notification connection lost; reconnecting", logkey.Error, err)
		conn = s.reconnect(ctx)
		if conn == nil {
			return
		}
		signal()
	}
}

// reconnect listens again, waiting longer after each failure, until it
// succeeds (the new connection) or ctx ends (nil).
func (s *Store) reconnect(ctx context.Context) *pgx.Conn {
	backoff := listenBackoffMin
	for {
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		conn, err := s.listen(ctx)
		if err == nil {
			return conn
		}
		if ctx.Err() != nil {
			return nil
		}
		s.logger.Warn("notification reconnect failed", logkey.Error, err)
		backoff = min(2*backoff, listenBackoffMax)
	}
}
