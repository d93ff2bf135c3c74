// Package dispatch moves deliveries from the store to receivers: it claims
// due deliveries in batches under a lease, hands them to a bounded pool of
// senders, decides each outcome (delivered, retry, dead) and writes the
// outcomes back in batches.
//
// Delivery is at least once: a delivery is only ever marked delivered after a
// 2xx, and a node that dies mid-attempt leaves a lease that expires, after
// which another node claims the delivery again (invariant 3). Every write that
// ends a claim carries the lease token, so a node that wakes after its lease
// expired cannot overwrite a newer outcome (invariant 10), and no request goes
// out unless the lease outlives it, so a node that wakes after its lease
// expired does not send either (see Dispatcher.attempt).
//
// # The path of one delivery
//
// The API (internal/api, events.go) validates an event and calls
// Store.EventIngest, which commits the event and its deliveries in one
// transaction before the call answers 202 (invariant 1); how each backend
// writes it, in groups and leasing some deliveries at once, is in the
// package docs of pgstore and sqlitestore. From there the dispatcher of
// every serve and worker node takes over:
//
//  1. Wake-up. Run subscribes once (Store.Subscribe: LISTEN/NOTIFY on
//     PostgreSQL, in process on SQLite). After a claim that came back short,
//     idle waits for a wake-up, for the next due time the store gives
//     (Store.DeliveryNextDue), for a written batch that handed leases back
//     or scheduled retries, or for PollInterval on the injected clock. A
//     written outcome ends the wait only while NextDue.DueNow says work due
//     now waits unleased (room freed under an in-flight cap, a FIFO head
//     moved). Woken within Linger of its last claim, the loop waits Linger,
//     so that a claim carries what arrived meanwhile; after a quiet spell it
//     claims at once.
//  2. Claim. claimLoop takes free slots (one per attempt, held until its
//     outcome is written, or until it has waited LongAfter for its answer:
//     then, when the loop waits for a slot or an ingest reserves one, the
//     attempt gives its slot back and runs on among the long ones,
//     long.go) and calls
//     Store.DeliveryClaim with Limit,
//     LeaseMargin and Now (zero in production: the database clock decides).
//     A lease lasts DeliveryClaimParams.LeaseFor, twice the endpoint's
//     timeout plus the margin. A caught-up loop leaves up to claimLeaves
//     slots (an eighth of its batch) free for ingests to lease into, and at
//     most every store.TidyInterval has the store move the due marks of
//     endpoints whose due work is done to their next due time, or drop them
//     (tidy, Store.EndpointQueueTidy). A node runs one suspect (a delivery
//     that lost a lease: it may kill its node) at a time; the others a
//     claim returns are handed back at once (isolateSuspects), and the
//     loop waits for its suspect to end before it claims again.
//  3. Leasing at ingest. The dispatcher is its store's store.Taker
//     (taker.go): an ingest reserves free slots (Reserve, none while more
//     than takeBusyMax deliveries were handed to workers over the last
//     takeBusyWindow, however many are under way; ReserveBatch has no
//     such bound), leases deliveries in its own transaction, and hands
//     them over after its commit (Take). They skip steps 1 and 2.
//  4. Attempt. A worker runs attempt. Work whose lease would not outlive
//     the request (leaseTooShort), that had not started when the node began
//     to stop, or that the drain deadline cut off, is handed back and spends
//     no attempt. The request
//     carries the event id as its webhook id and the stored payload as its
//     body (invariants 5 and 6), signed with the current secret and, until
//     PreviousSecretExpiresAt, the previous one. sender.Sender.Send makes
//     the one HTTP request and classifies its answer; it never returns an
//     error.
//  5. Decide. Decide applies DESIGN.md's delivery rules: a 2xx is
//     delivered; 410 is dead (gone) and disables the endpoint; another 4xx
//     is dead (client_error) unless the endpoint retries client errors;
//     otherwise retry.PolicyFor gives the delay, with Retry-After as a
//     floor, or dead (exhausted) once the budget is spent. PauseFor and
//     Throttled travel with the outcome. The breaker is not consulted here:
//     the store applies it at claim and at outcome write.
//  6. Write. writeResults takes every result waiting (up to 500, and those
//     that arrive within Linger), and write calls
//     Store.DeliveryCompleteMany, and Store.DeliveryRelease for leases
//     handed back, on a context of its own, trying a failed write again for
//     OutcomeRetryFor. Each outcome is fenced by its lease token: one whose
//     lease is no longer held is not applied, and only its attempt is
//     logged. In the same transaction the store updates the endpoint's
//     health (internal/breaker), disables it if need be and ingests the
//     notifications the outcome deserves; Hooks.Notified hands them on
//     after the commit (internal/notice mails them).
//  7. After. The slots come back and kick wakes the claim loop. Hooks
//     report each step (internal/metrics plugs in there; this package does
//     not import it). Notifications are ordinary events: they go out like
//     any delivery, and their own outcomes emit nothing.
package dispatch
