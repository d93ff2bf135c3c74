-- Less write work per delivery on the hot path, with the same rows.
--
-- The foreign keys of deliveries (its event) and attempts (its
-- delivery) cost, for every delivery inserted and every attempt recorded,
-- a lookup of the row referred to and a row lock on it (FOR KEY SHARE),
-- which is a WAL record of its own and dirties the page of the event or
-- the delivery: one lock record per event ingested and one per attempt,
-- a third of the row locks an event's path wrote. Purging paid the
-- reverse check for every row it deleted. What they guarded, Herald's
-- writers keep: ingest inserts an event and its deliveries in one
-- transaction; an attempt is inserted by the statement that finds its
-- delivery (completeSQL, which reads the delivery in the same statement);
-- a purge deletes attempts, then deliveries, then their events, and only
-- those whose deliveries ended long before (a delivery that has ended is
-- never attempted again, and replaying one makes it live, which the purge
-- leaves alone).
ALTER TABLE deliveries DROP CONSTRAINT IF EXISTS deliveries_event_id_fkey;
ALTER TABLE attempts DROP CONSTRAINT IF EXISTS attempts_delivery_id_fkey;

-- The delivery queue's rows (migration 0017), written without an
-- upsert's costs where they buy nothing. INSERT ... ON CONFLICT inserts
-- speculatively (a row, then its confirmation, in the WAL) or, on a
-- conflict, locks the row before it updates it (a lock record before the
-- update's own). An ingest's new deliveries never have a queue row, so an
-- insert of deliveries inserts their queue rows plainly. An update of
-- deliveries, in one statement: deletes the queue rows of those that
-- ended, updates the queue rows there are of those live (a claim's always
-- are there), and inserts those missing (a delivery made live again: a
-- replay). The statement that writes a delivery holds its row lock, so no
-- other writer touches its queue row meanwhile; the conflict clause left
-- on the insert only keeps a broken assumption from failing a write.
CREATE OR REPLACE FUNCTION herald_delivery_queue_put() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO delivery_queue (delivery_id, endpoint_id, consumer_id, seq, kind, leased, due_at)
        SELECT n.id, n.endpoint_id, n.consumer_id, n.seq, least(n.attempt_count, 1),
            n.status = 'delivering', n.due_at
        FROM new_rows n
        WHERE n.status IN ('pending', 'delivering')
        ORDER BY n.id;
        RETURN NULL;
    END IF;
    WITH gone AS (
        DELETE FROM delivery_queue q
        USING new_rows n
        WHERE q.delivery_id = n.id AND n.status NOT IN ('pending', 'delivering')
    ), live AS (
        SELECT n.id, n.endpoint_id, n.consumer_id, n.seq,
            least(n.attempt_count, 1)::smallint AS kind,
            n.status = 'delivering' AS leased, n.due_at
        FROM new_rows n
        WHERE n.status IN ('pending', 'delivering')
    ), kept AS (
        UPDATE delivery_queue q SET kind = l.kind, leased = l.leased, due_at = l.due_at
        FROM live l
        WHERE q.delivery_id = l.id
        RETURNING q.delivery_id
    )
    INSERT INTO delivery_queue (delivery_id, endpoint_id, consumer_id, seq, kind, leased, due_at)
    SELECT l.id, l.endpoint_id, l.consumer_id, l.seq, l.kind, l.leased, l.due_at
    FROM live l
    WHERE NOT EXISTS (SELECT 1 FROM kept k WHERE k.delivery_id = l.id)
    ORDER BY l.id
    ON CONFLICT (delivery_id) DO NOTHING;
    RETURN NULL;
END
$$;
