-- Endpoint protection: health (breaker, streak, pause, slow-down), the
-- token bucket, FIFO ordering and auto-disable settings; the ingest order of
-- deliveries; indexes for per-endpoint claims and the breaker window.

ALTER TABLE endpoints ADD COLUMN ordering TEXT NOT NULL DEFAULT '';
ALTER TABLE endpoints ADD COLUMN auto_disable_after_failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE endpoints ADD COLUMN auto_disable_after_ns INTEGER NOT NULL DEFAULT 0;
-- JSON of the kept health (see health.go); existing endpoints start closed.
ALTER TABLE endpoints ADD COLUMN health TEXT NOT NULL DEFAULT '{"breaker_state":"closed","rate_factor":1}';
-- The health's BlockedUntil, kept in step with it, so claims skip paused
-- and open endpoints without decoding the health.
ALTER TABLE endpoints ADD COLUMN blocked_until INTEGER;
-- The token bucket: bucket_tokens as of bucket_at; NULL bucket_at is full.
ALTER TABLE endpoints ADD COLUMN bucket_tokens REAL NOT NULL DEFAULT 0;
ALTER TABLE endpoints ADD COLUMN bucket_at INTEGER;

-- seq is the ingest order (FIFO endpoints, ties in claims). It comes from
-- the counter below and never changes; rowids may (VACUUM renumbers them).
ALTER TABLE deliveries ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
UPDATE deliveries SET seq = r.n
    FROM (SELECT id, row_number() OVER (ORDER BY created_at, rowid) AS n FROM deliveries) AS r
    WHERE r.id = deliveries.id;

CREATE TABLE sequences (
    name  TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) STRICT;
INSERT INTO sequences (name, value) VALUES ('delivery_seq', (SELECT coalesce(max(seq), 0) FROM deliveries));

-- Per-endpoint claims: new deliveries (attempt_count 0) before retries,
-- then oldest due first; also answers "has this endpoint due work".
CREATE INDEX deliveries_endpoint_queue ON deliveries (endpoint_id, attempt_count > 0, due_at, seq)
    WHERE status IN ('pending', 'delivering');
-- FIFO heads: the live delivery of an endpoint ingested first.
CREATE INDEX deliveries_endpoint_seq ON deliveries (endpoint_id, seq)
    WHERE status IN ('pending', 'delivering');
-- In-flight counts: the endpoint's leases and when they expire.
CREATE INDEX deliveries_in_flight ON deliveries (endpoint_id, due_at) WHERE status = 'delivering';
-- The breaker window and the last hour's success rate.
CREATE INDEX attempts_endpoint ON attempts (endpoint_id, attempted_at);
