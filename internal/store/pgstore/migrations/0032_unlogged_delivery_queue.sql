-- The delivery queue is written without WAL. Every row of it is made
-- from deliveries, in the statement that writes the delivery (migration
-- 0017), and can be made again from deliveries alone; logged, it cost a
-- third of the WAL that is not the payload: its row, five index entries
-- and its delete, 690 bytes of 3,490 a delivery (BENCHMARKS "WAL a
-- delivery"), and the vacuums Herald runs on it every few seconds.
--
-- PostgreSQL empties an unlogged table when it recovers from a crash and
-- on a standby it promotes, so the queue can be found empty, or holding
-- only what was written since, while deliveries are live. It is emptied
-- with delivery_queue_built, unlogged too, whose one row says the queue
-- holds every live delivery. Until the row is back:
--   - nothing is leased: herald_take_shards (below) finds no room, for
--     ingests and claims alike, and a claim takes no FIFO head (takeSQL),
--     so no cap and no order is decided on a queue missing deliveries;
--   - cancelling or disabling an endpoint finds its live deliveries among
--     its history instead (cancelEndpointSQL, disableEndpointSQL).
-- Nodes call herald_delivery_queue_ready every second; the first that
-- finds the row missing makes the queue again, holding the writers of
-- deliveries out while it reads them (their scan is its cost).
--
-- A node of an earlier release never makes the queue again: after a crash
-- during a rolling upgrade, the live deliveries wait for a node of this
-- release to start.
ALTER TABLE delivery_queue SET UNLOGGED;

CREATE UNLOGGED TABLE delivery_queue_built (
    built boolean PRIMARY KEY CHECK (built)
);
INSERT INTO delivery_queue_built VALUES (true);

-- herald_delivery_queue_ready makes the delivery queue again if it is not
-- built, and returns the rows it put back, or NULL when it was built. It
-- takes the writers' lock of deliveries (SHARE ROW EXCLUSIVE: it waits for
-- the writers under way, and holds new ones and other rebuilds out until
-- it commits) and the endpoint queue's writer lock (migration 0007), so
-- that a tidy does not move a mark past a row it puts back. Rows written
-- since the queue was emptied are kept; every endpoint's due mark is
-- brought down to its earliest live delivery. Leased deliveries come back
-- in shard 0 of their endpoint's cap, which herald_shard_room counts with
-- the other shards.
CREATE FUNCTION herald_delivery_queue_ready() RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    n bigint;
BEGIN
    IF EXISTS (SELECT 1 FROM delivery_queue_built WHERE built) THEN
        RETURN NULL;
    END IF;
    LOCK TABLE deliveries IN SHARE ROW EXCLUSIVE MODE;
    IF EXISTS (SELECT 1 FROM delivery_queue_built WHERE built) THEN
        RETURN NULL;
    END IF;
    PERFORM pg_advisory_xact_lock_shared(1213353041, hashtext(current_schema()));
    INSERT INTO delivery_queue (delivery_id, endpoint_id, consumer_id, seq, kind, leased, due_at, shard)
    SELECT id, endpoint_id, consumer_id, seq, least(attempt_count, 1), status = 'delivering', due_at, 0
    FROM deliveries
    WHERE status IN ('pending', 'delivering')
    ON CONFLICT (delivery_id) DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    INSERT INTO endpoint_queue AS q (endpoint_id, due_at)
    SELECT endpoint_id, min(due_at) FROM delivery_queue GROUP BY endpoint_id
    ON CONFLICT (endpoint_id) DO UPDATE SET due_at = excluded.due_at
        WHERE q.due_at > excluded.due_at;
    INSERT INTO delivery_queue_built VALUES (true);
    RETURN n;
END
$$;

-- herald_take_shards as in migration 0024, finding no room while the
-- queue is not built.
CREATE OR REPLACE FUNCTION herald_take_shards(endpoint text, cap int, t timestamptz, want int)
RETURNS TABLE (shard int, room int)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    n int := herald_shards(cap);
    first int := floor(random() * herald_shards(cap))::int;
    k int;
    r int;
    got int := 0;
BEGIN
    IF want <= 0 OR NOT EXISTS (SELECT 1 FROM delivery_queue_built WHERE built) THEN
        RETURN;
    END IF;
    FOR i IN 0 .. n - 1 LOOP
        k := (first + i) % n;
        IF pg_try_advisory_xact_lock(1213353043, hashtext(current_schema() || ':' || endpoint || ':' || k)) THEN
            r := herald_shard_room(endpoint, cap, k, t);
            IF r > 0 THEN
                shard := k;
                room := r;
                RETURN NEXT;
                got := got + r;
                EXIT WHEN got >= want;
            END IF;
        END IF;
    END LOOP;
END
$$;
