-- The delivery queue: a row per live delivery (pending or delivering), with
-- what claims choose by, and nothing else. Claims, in-flight counts, FIFO
-- heads, the next due time and the figures of due work read this table
-- alone, so they never meet a finished delivery: however much history
-- deliveries holds, and however many dead row versions its updates leave
-- before a vacuum, the claim path walks only the live rows and the dead
-- versions of this small table, which Herald vacuums itself every few
-- seconds (vacuumQueue), with autovacuum on or off.
--
-- The triggers below keep it in step with deliveries in the same
-- statement: whatever makes a delivery live (ingest, a retry scheduled, a
-- lease handed back, a replay) puts its row, a claim updates it, and
-- whatever ends it (an outcome, a cancel, a disable, a delete) removes it.
-- Writers lock a delivery before its queue row (the trigger runs after
-- the row is written), and claims lock deliveries, never queue rows, so
-- the two tables are always locked in that order.
--
-- kind is least(attempt_count, 1): 0 for a new delivery, 1 for a retry;
-- leased says the delivery is delivering, due_at being then its lease's
-- expiry. seq and consumer_id never change.
CREATE TABLE delivery_queue (
    delivery_id text PRIMARY KEY,
    endpoint_id text NOT NULL,
    consumer_id text NOT NULL,
    seq         bigint NOT NULL,
    kind        smallint NOT NULL,
    leased      boolean NOT NULL,
    due_at      timestamptz NOT NULL
);

INSERT INTO delivery_queue (delivery_id, endpoint_id, consumer_id, seq, kind, leased, due_at)
SELECT id, endpoint_id, consumer_id, seq, least(attempt_count, 1), status = 'delivering', due_at
FROM deliveries
WHERE status IN ('pending', 'delivering');

-- The per-endpoint claim: new before retries, then oldest due first, then
-- in ingest order.
CREATE INDEX delivery_queue_claim_idx ON delivery_queue (endpoint_id, kind, due_at, seq);
-- The head of a FIFO endpoint: its live delivery ingested first.
CREATE INDEX delivery_queue_fifo_idx ON delivery_queue (endpoint_id, seq);
-- In-flight counts: an endpoint's leased deliveries.
CREATE INDEX delivery_queue_leased_idx ON delivery_queue (endpoint_id, due_at) WHERE leased;
-- The next due time and the count of work due, over every endpoint.
CREATE INDEX delivery_queue_due_idx ON delivery_queue (due_at);

-- Autovacuum, where it runs, should not wait for a fifth of a table whose
-- rows all turn over within seconds.
ALTER TABLE delivery_queue SET (autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 5000, autovacuum_analyze_scale_factor = 0,
    autovacuum_analyze_threshold = 5000);

CREATE FUNCTION herald_delivery_queue_put() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        DELETE FROM delivery_queue q
        USING new_rows n
        WHERE q.delivery_id = n.id AND n.status NOT IN ('pending', 'delivering');
    END IF;
    INSERT INTO delivery_queue AS q (delivery_id, endpoint_id, consumer_id, seq, kind, leased, due_at)
    SELECT n.id, n.endpoint_id, n.consumer_id, n.seq, least(n.attempt_count, 1),
        n.status = 'delivering', n.due_at
    FROM new_rows n
    WHERE n.status IN ('pending', 'delivering')
    ORDER BY n.id
    ON CONFLICT (delivery_id) DO UPDATE SET
        kind = excluded.kind, leased = excluded.leased, due_at = excluded.due_at
    WHERE (q.kind, q.leased, q.due_at) IS DISTINCT FROM (excluded.kind, excluded.leased, excluded.due_at);
    RETURN NULL;
END
$$;

CREATE FUNCTION herald_delivery_queue_drop() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM delivery_queue q
    USING old_rows o
    WHERE q.delivery_id = o.id AND o.status IN ('pending', 'delivering');
    RETURN NULL;
END
$$;

CREATE TRIGGER deliveries_live_insert AFTER INSERT ON deliveries
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION herald_delivery_queue_put();
CREATE TRIGGER deliveries_live_update AFTER UPDATE ON deliveries
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION herald_delivery_queue_put();
CREATE TRIGGER deliveries_live_delete AFTER DELETE ON deliveries
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION herald_delivery_queue_drop();

-- deliveries' own indexes on live rows are no longer read: every update of
-- a live delivery wrote each of them.
DROP INDEX deliveries_claim_idx;
DROP INDEX deliveries_fifo_idx;
DROP INDEX deliveries_leased_idx;
DROP INDEX deliveries_due_idx;
