-- The endpoint queue: one row per endpoint that has live deliveries, with
-- a time no later than the earliest of them falls due (a pending
-- delivery's next attempt, a leased one's lease expiry). Claims find the
-- endpoints with due work here, by the due index, instead of walking every
-- endpoint: an endpoint with nothing live has no row, and one whose work
-- lies in the future has a row not yet due, so neither costs a claim
-- anything.
--
-- The row's time only ever falls through the triggers below: whatever
-- makes a delivery pending (ingest, an outcome scheduling a retry, a lease
-- handed back, a replay) lowers it in the same transaction, and writes
-- nothing when the row is already due by then. Only EndpointQueueTidy
-- raises it again, to the endpoint's earliest live due time, or deletes
-- the row when nothing is live. SQLite has one writer, so the two never
-- overlap.
CREATE TABLE endpoint_queue (
    endpoint_id TEXT PRIMARY KEY,
    due_at      INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

CREATE INDEX endpoint_queue_due ON endpoint_queue (due_at);

INSERT INTO endpoint_queue (endpoint_id, due_at)
SELECT endpoint_id, min(due_at)
FROM deliveries
WHERE status IN ('pending', 'delivering')
GROUP BY endpoint_id;

CREATE TRIGGER deliveries_queue_insert AFTER INSERT ON deliveries
WHEN NEW.status = 'pending'
BEGIN
    INSERT INTO endpoint_queue (endpoint_id, due_at) VALUES (NEW.endpoint_id, NEW.due_at)
    ON CONFLICT (endpoint_id) DO UPDATE SET due_at = excluded.due_at
        WHERE excluded.due_at < endpoint_queue.due_at;
END;

CREATE TRIGGER deliveries_queue_update AFTER UPDATE OF status, due_at ON deliveries
WHEN NEW.status = 'pending'
BEGIN
    INSERT INTO endpoint_queue (endpoint_id, due_at) VALUES (NEW.endpoint_id, NEW.due_at)
    ON CONFLICT (endpoint_id) DO UPDATE SET due_at = excluded.due_at
        WHERE excluded.due_at < endpoint_queue.due_at;
END;
