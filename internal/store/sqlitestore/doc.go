// Package sqlitestore is the embedded store.Store: one SQLite file, written
// through the pure-Go modernc.org/sqlite driver, for a single Herald node
// that needs nothing else.
//
// SQLite has one writer at a time, so the store keeps one write connection
// (every write transaction begins IMMEDIATE on it, which queues writers in
// Go instead of failing them with SQLITE_BUSY) and a separate pool of
// read-only connections that WAL lets read beside the writer. Commits use
// synchronous=FULL: accepted means on disk. Since the process is the only
// node, the process clock stands in for the database clock when a caller
// passes no Now. WAL checkpoints run on a connection of their own
// (checkpoint), off the writer's path, and the hot paths' statements are
// compiled once on the writer (prepared.go).
//
// # The path of one delivery
//
// The dispatcher's side of the path is in internal/dispatch; this is the
// database's. Each step's file says more.
//
// Ingest (event.go, groupcommit.go). EventIngest hands the call to
// groupIngest: calls that arrive while another is written wait, and the next
// to write takes the queue into one transaction (group commit: leadGroup,
// writeGroup), at most maxGroupCalls calls or maxGroupItems events, written
// one after the other without savepoints; should a call fail, the group is
// written again with each call in its own savepoint (ingestInSavepoint), so
// that it fails alone. A lone call waits for no one. ingest fans each event
// out to its consumer's matching endpoints (fanOutTargets) and numbers each
// delivery with the group's seqCounter, the FIFO order. After the commit,
// notify wakes the subscribers in this process if a delivery was queued.
//
// Leasing at ingest (leasing.go). With the node's dispatcher as taker
// (SetTaker), the group's lead reserves slots before its transaction
// (reserveGroup, through store.Taker's ReserveBatch); the consumers'
// endpoints are read whole (fanOutWholeQuery) and kept by consumer while
// endpoints_version stands (endpointkeep.go, migration 0018);
// store.LeasableAtIngest decides as a claim would, and roomQuery counts an
// endpoint's room under its cap once a group, which then keeps it in
// memory: the one writer makes it exact. A leased delivery is inserted
// delivering, lease token 1, due when its lease runs out, and its
// endpoint's due mark is lowered to that (migration 0017). After the commit
// the lead hands the leased deliveries to the taker, but those of a call
// rolled back.
//
// Claim (claim.go). candidatesQuery starts from the due rows of
// endpoint_queue (migration 0007: a mark per endpoint with live
// deliveries, lowered by triggers whenever one becomes pending), so
// endpoints with nothing due cost nothing; takeShares deals the limit one
// delivery per endpoint per round (deal) and leases (takeDue, takeHead for
// a FIFO endpoint, leaseRows); afterClaim writes the buckets and probes.
// One writer, so the counts under the caps are exact. A lease keeps its
// expiry in the row's due_at and moves lease_token, so an expired lease is
// simply due again; EndpointQueueTidy moves marks whose work is done.
//
// Outcome (complete.go). DeliveryCompleteMany runs completer.complete per
// outcome (the attempt logged, the outcome applied only under its lease
// token, breaker.Config.Observe), then completer.finish writes health,
// disables endpoints and ingests notifications, in one transaction. The
// write goes through writeOutcome: while ingest calls wait for the next
// group, it rides that group (outcomeRide), its statements first, so that
// one commit and one WAL sync write the pages both touched; should that
// transaction fail, the riders write alone (errNotCarried).
//
// Listing (list.go). The lister moves new events and deliveries into the
// listings of the history (a consumer's events and deliveries, an
// endpoint's deliveries: migration 0020) every listEvery, in batches of up
// to listBatch rows, so that the entries of a second's rows share their
// pages; until then a trigger keeps them queued (unlisted_events,
// unlisted_deliveries), and reads by consumer or endpoint join the queue.
package sqlitestore
