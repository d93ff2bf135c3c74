// Package pgstore is the PostgreSQL backend of the Herald store: many
// stateless Herald nodes share one database, which is their only
// coordinator. Claims take due deliveries with FOR UPDATE SKIP LOCKED under
// a lease fenced by a growing token, LISTEN/NOTIFY wakes idle dispatchers on
// every node, and "now" comes from the database clock unless the caller
// passes its own (tests do), so nodes with skewed clocks agree.
//
// Everything lives in the schema that the connection's search_path selects,
// so one database can hold several independent Herald installations (the
// tests use one schema each).
//
// # The path of one delivery
//
// The dispatcher's side of the path is in internal/dispatch; this is the
// database's. Each step's file says more.
//
// Ingest (event.go, groupcommit.go). EventIngest hands the call to
// groupIngest: calls that overlap share one transaction (group commit,
// writeGroup); a call that comes while a group is written waits for the
// next, and a second group is written beside the first only once
// moreLeadersQueue calls wait. In a steady stream a call that finds nothing
// to join waits up to lingerFor for company (waitForCompany), since at a
// moderate rate a transaction's statements, not its rows, are what the
// database spends. A lone call (ingestAlone) or a group (ingestGroupTx) is a
// batchTx (batchtx.go) of two round trips: BEGIN, the endpoints read and
// the events insert; then the deliveries insert, the pg_notify wake-up and
// the COMMIT. A node remembers the endpoints it read for a consumer
// (ingestcache.go): an ingest whose consumers it all remembers is one round
// trip, checked in the database against each endpoint's config_version
// (migration 0022), and written again reading them on a mismatch. A
// statement that fails sends the group again call by call, each in a
// savepoint (ingestInSavepoint); a COMMIT the database answered counts, even
// if the connection breaks before the batch's end is read.
//
// Leasing at ingest (leasing.go). With the node's dispatcher as taker
// (SetTaker), an ingest reserves free attempt slots, picks the endpoints a
// claim could start work for now (store.LeasableAtIngest), and in the batch
// that commits takes shards of their in-flight caps that no other
// transaction holds (migration 0024: never waiting, so that ingests and
// claims lease to one busy endpoint side by side) and leases, in ingest
// order, up to the shards' room and the slots reserved. After the commit the leased deliveries go to the
// dispatcher (store.Taker's Take); the rest is queued, and the nodes woken,
// as ever.
//
// The queue (queue.go). The claim path never reads the history: a row of
// endpoint_queue marks each endpoint with live deliveries as due no later
// than the earliest of them (migration 0007), and delivery_queue holds a
// row per live delivery (0017), both kept in step with deliveries by
// statement triggers, or by ingest and the claim themselves in the
// statements that insert and lease (0020, 0021). Writers hold a shared
// advisory lock per endpoint from reading its queue row to commit; the tidy
// (EndpointQueueTidy) moves only rows whose lock it gets at once. Each node
// vacuums both queue tables every queueVacuumEvery (vacuumQueue), so
// finished deliveries' dead rows never reach a claim, with autovacuum on or
// off.
// delivery_queue_built (0032) says the queue holds every live delivery;
// once the queue is unlogged (0033) PostgreSQL empties both on crash
// recovery and on a promoted standby. Until a node's claim makes it again
// from deliveries (queueReady, at most every second), nothing is leased.
//
// Claim (claim.go). One batchTx on generic plans (claimTx): candidatesSQL
// locks due endpoints FOR NO KEY UPDATE SKIP LOCKED in random order;
// breaker.GateAt and ratelimit.Allowance say how many each may start; deal
// hands out the limit one delivery per endpoint per round; takeSQL leases
// each share, new deliveries before retries and a FIFO endpoint's head
// only, within the room of the cap's shards it takes; writeBack sends the token
// buckets and probes with the COMMIT. A lease keeps its expiry in the row's due_at and
// moves lease_token, so an expired lease is simply due again.
//
// Wake-ups (subscribe.go). LISTEN runs on a connection outside the pool, on
// the schema's channel (channelName); after a dropped connection it
// reconnects and sends one wake-up, since a notification may have been
// missed.
//
// Outcome (complete.go, rides.go). DeliveryCompleteMany locks the batch's
// endpoints in id order (lockOutcomeEndpointsSQL), logs every attempt, and
// applies an outcome only where the delivery is still delivering under its
// lease token; observe then runs breaker.Config.Observe per applied outcome,
// writes health, disables endpoints and ingests the notifications, all in
// that transaction. A batch of plain successes (plainSuccesses) takes
// completePlain instead: one round trip, its endpoints held FOR KEY SHARE
// (so leasing ingests and claims go on beside it), an endpoint's row rewritten at most
// once per store.LastSuccessPrecision, and rolled back onto the breaker's
// path (herald_outcomes_not_plain, migration 0023) if an endpoint's health
// is not plain or a lease was lost. While ingests arrive, such a write
// rides the next ingest transaction of its node and commits with it.
//
// Locks. Every writer of several deliveries takes their endpoints first, in
// id order, and a delivery before its queue row; claims never wait for a
// lock, and no one waits for a shard of an in-flight cap. So writers
// cannot deadlock.
package pgstore
