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
-- handed back, a replay) lowers it in the same transaction. Only
-- EndpointQueueTidy raises it again, to the endpoint's earliest live due
-- time, or deletes the row when nothing is live.
--
-- The race between the two is closed with advisory locks, not row locks:
-- a writer takes a shared lock per endpoint (or, past 32 endpoints in one
-- statement, one shared lock for all of them) before it reads the queue
-- row, and holds it to commit; the tidy raises only the rows whose lock it
-- could take exclusively, without waiting. So a writer either sees the
-- raised time and lowers it again, or its delivery is committed before the
-- tidy reads the endpoint's deliveries. Shared locks do not conflict, and
-- a writer that finds the row already due writes nothing: concurrent
-- ingests to a busy endpoint are not serialised on its row.
CREATE TABLE endpoint_queue (
    endpoint_id text PRIMARY KEY,
    due_at      timestamptz NOT NULL
);

CREATE INDEX endpoint_queue_due_idx ON endpoint_queue (due_at);

INSERT INTO endpoint_queue (endpoint_id, due_at)
SELECT endpoint_id, min(due_at)
FROM deliveries
WHERE status IN ('pending', 'delivering')
GROUP BY endpoint_id;

-- 1213353041 is the advisory lock class of the endpoint queue ("HRLQ");
-- the second key is hashtext(schema || ':' || endpoint id), or
-- hashtext(schema) for every endpoint at once: advisory locks span the
-- database, and each schema is a Herald of its own.
CREATE FUNCTION herald_endpoint_queue_mark() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    ids text[];
BEGIN
    SELECT array_agg(DISTINCT n.endpoint_id) INTO ids
    FROM new_rows n
    WHERE n.status = 'pending';
    IF ids IS NULL THEN
        RETURN NULL;
    END IF;
    IF cardinality(ids) > 32 THEN
        PERFORM pg_advisory_xact_lock_shared(1213353041, hashtext(current_schema()));
    ELSE
        PERFORM pg_advisory_xact_lock_shared(1213353041, hashtext(current_schema() || ':' || i))
        FROM unnest(ids) AS i;
    END IF;
    -- A statement of its own, so that it reads the queue as it is once the
    -- locks are held (a volatile function takes a snapshot per statement).
    INSERT INTO endpoint_queue AS q (endpoint_id, due_at)
    SELECT m.endpoint_id, m.due_at
    FROM (
        SELECT n.endpoint_id, min(n.due_at) AS due_at
        FROM new_rows n
        WHERE n.status = 'pending'
        GROUP BY n.endpoint_id
    ) AS m
    WHERE NOT EXISTS (
        SELECT 1 FROM endpoint_queue x
        WHERE x.endpoint_id = m.endpoint_id AND x.due_at <= m.due_at)
    ORDER BY m.endpoint_id
    ON CONFLICT (endpoint_id) DO UPDATE SET due_at = excluded.due_at
        WHERE q.due_at > excluded.due_at;
    RETURN NULL;
END
$$;

CREATE TRIGGER deliveries_queue_insert AFTER INSERT ON deliveries
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION herald_endpoint_queue_mark();
CREATE TRIGGER deliveries_queue_update AFTER UPDATE ON deliveries
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION herald_endpoint_queue_mark();
