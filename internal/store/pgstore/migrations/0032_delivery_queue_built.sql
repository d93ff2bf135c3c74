-- Ready for a delivery queue written without WAL (migration 0033, a
-- release later). Every row of delivery_queue is made from deliveries, in
-- the statement that writes the delivery (migration 0017), and can be made
-- again from deliveries alone; logged, it costs a third of the WAL that is
-- not the payload: its row, five index entries and its delete, 690 bytes
-- of 3,490 a delivery (BENCHMARKS "WAL a delivery"), and the vacuums
-- Herald runs on it every few seconds.
--
-- PostgreSQL empties an unlogged table when it recovers from a crash and
-- on a standby it promotes, so an unlogged queue can be found empty, or
-- holding only what was written since, while deliveries are live. It is
-- emptied with delivery_queue_built, whose one row says the queue holds
-- every live delivery. Until the row is back:
--   - nothing is leased: herald_take_shards (below) finds no room, for
--     ingests and claims alike, and a claim takes no FIFO head (takeSQL),
--     so no cap and no order is decided on a queue missing deliveries;
--   - cancelling or disabling an endpoint finds its live deliveries among
--     its history instead (cancelEndpointSQL, disableEndpointSQL).
-- Nodes check the row every second; one that finds it missing makes the
-- queue again (herald_delivery_queue_refill, herald_delivery_queue_ready).
--
-- This migration only expands: both tables stay logged, the row is never
-- lost, and nodes of the release before go on as they did. The release
-- that makes them unlogged (0033) contracts the schema, so that no node
-- without these guards runs beside an unlogged queue.
CREATE TABLE delivery_queue_built (
    built boolean PRIMARY KEY CHECK (built)
);
INSERT INTO delivery_queue_built VALUES (true);

-- The delivery queue is made again in two transactions, each a function
-- below, so that the history is read with no lock held and writers are
-- held out only for work in proportion to the live deliveries. Both take
-- the rebuild's advisory lock (class 1213353026, "HRLB"; the second key
-- the hash of the schema), which writers never take: a refill never runs
-- beside a mend, so none can put back, from a snapshot older than the
-- mend, a row the mend would then not see.
--
-- herald_delivery_queue_refill puts back, holding no lock, a row for
-- every delivery live as its statement saw them (a scan of the history,
-- which writers go on beside), in id order as every writer of the queue
-- inserts, and returns how many it put back. Rows are left to mend: a
-- delivery may end or change before it commits.
CREATE FUNCTION herald_delivery_queue_refill() RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    n bigint;
BEGIN
    IF EXISTS (SELECT 1 FROM delivery_queue_built WHERE built) THEN
        RETURN 0;
    END IF;
    PERFORM pg_advisory_xact_lock(1213353026, hashtext(current_schema()));
    IF EXISTS (SELECT 1 FROM delivery_queue_built WHERE built) THEN
        RETURN 0;
    END IF;
    INSERT INTO delivery_queue (delivery_id, endpoint_id, consumer_id, seq, kind, leased, due_at, shard)
    SELECT id, endpoint_id, consumer_id, seq, least(attempt_count, 1), status = 'delivering', due_at,
        CASE WHEN status = 'delivering'
            THEN (row_number() OVER (PARTITION BY endpoint_id ORDER BY id) % 4)::smallint
            ELSE 0 END
    FROM deliveries
    WHERE status IN ('pending', 'delivering')
    ORDER BY id
    ON CONFLICT (delivery_id) DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- herald_delivery_queue_ready, after a refill, takes the writers' lock of
-- deliveries (SHARE ROW EXCLUSIVE: it waits for the writers under way,
-- and holds new ones and other rebuilds out until it commits) and the
-- endpoint queue's writer lock (migration 0007, so that a tidy does not
-- move a mark past a row put back), and mends by the queue's own rows
-- what writers changed since the refill read: a row whose delivery ended
-- goes, a row that differs from its delivery is brought in line. A writer
-- that made a delivery live since the queue was emptied wrote its row
-- itself (the triggers of 0017). Every endpoint's due mark is brought
-- down to its earliest live delivery, and the built row goes back. It
-- returns whether it put the row back (false: it was there, or another
-- node put it back first; what it mended stays mended). Leased
-- deliveries come back dealt over the four shards of their endpoint's
-- cap (herald_shard_room folds a shard past the cap's number onto the
-- others).
CREATE FUNCTION herald_delivery_queue_ready() RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM delivery_queue_built WHERE built) THEN
        RETURN false;
    END IF;
    PERFORM pg_advisory_xact_lock(1213353026, hashtext(current_schema()));
    LOCK TABLE deliveries IN SHARE ROW EXCLUSIVE MODE;
    PERFORM pg_advisory_xact_lock_shared(1213353041, hashtext(current_schema()));
    DELETE FROM delivery_queue q
    WHERE NOT EXISTS (
        SELECT 1 FROM deliveries d
        WHERE d.id = q.delivery_id AND d.status IN ('pending', 'delivering'));
    UPDATE delivery_queue q SET
        kind = least(d.attempt_count, 1), leased = d.status = 'delivering', due_at = d.due_at
    FROM deliveries d
    WHERE d.id = q.delivery_id
        AND (q.kind, q.leased, q.due_at) IS DISTINCT FROM
            (least(d.attempt_count, 1)::smallint, d.status = 'delivering', d.due_at);
    INSERT INTO endpoint_queue AS q (endpoint_id, due_at)
    SELECT endpoint_id, min(due_at) FROM delivery_queue GROUP BY endpoint_id
    ON CONFLICT (endpoint_id) DO UPDATE SET due_at = excluded.due_at
        WHERE q.due_at > excluded.due_at;
    INSERT INTO delivery_queue_built VALUES (true) ON CONFLICT DO NOTHING;
    RETURN FOUND;
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
