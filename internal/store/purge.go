package store

import "time"

// EventPurgeParams asks for one batch of a purge pass (Store.EventPurge).
//
// An event is purged, with its deliveries and their attempts, once every
// one of its deliveries has ended (delivered, dead or cancelled) before the
// cutoff, Now - Retention; an event with no delivery at all counts as ended
// when it was created. A delivery's end is its updated_at: the write that
// makes a delivery terminal sets it, and nothing touches a terminal row
// again but a replay, which makes it live. The cutoff is taken from Now, so
// that with Now unset the database clock decides, as it does for leases.
type EventPurgeParams struct {
	// Retention is how long history is kept after it ended; it must be
	// positive.
	Retention time.Duration
	// After is where this batch starts: the Next of the batch before, or
	// the zero cursor to start a pass at the oldest event.
	After PurgeCursor
	// Limit is how many events the batch looks at (not how many it
	// deletes): a batch costs the same whether the events it looks at go
	// or stay. 0 means DefaultPurgeLimit; at most MaxPurgeLimit.
	Limit int
	Now   time.Time
}

// PurgeCursor is a position in the walk of a purge pass: events in
// (CreatedAt, EventID) order.
type PurgeCursor struct {
	CreatedAt time.Time
	EventID   string
}

// PurgeResult says what one batch of a purge deleted, and where the pass
// goes on.
type PurgeResult struct {
	// Events, Deliveries and Attempts count the rows deleted.
	Events, Deliveries, Attempts int64
	// Next is where the next batch of this pass starts (the last event
	// looked at).
	Next PurgeCursor
	// Done says the pass has looked at every event created before the
	// cutoff: the next batch would find nothing, and a new pass starts
	// from the zero cursor.
	Done bool
	// Busy says another node holds the purge (PostgreSQL): this batch
	// looked at nothing and deleted nothing. Its Next is After.
	Busy bool
}

// Rows is how many rows the batch deleted, in every table.
func (r PurgeResult) Rows() int64 { return r.Events + r.Deliveries + r.Attempts }

// DefaultPurgeLimit and MaxPurgeLimit bound how many events one batch of
// a purge looks at: each batch is one short transaction.
const (
	DefaultPurgeLimit = 200
	MaxPurgeLimit     = 5000
)

// PurgeLimit turns a requested batch size into one a purge uses.
func PurgeLimit(limit int) int {
	if limit <= 0 {
		return DefaultPurgeLimit
	}
	return min(limit, MaxPurgeLimit)
}
