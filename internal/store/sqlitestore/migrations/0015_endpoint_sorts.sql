-- The endpoints table sorted by health, due and dead
-- (GET /v1/endpoints?sort=health|-health|due|-dead). None of the three is a
-- column: each order puts first the endpoints that need attention, found
-- through what is kept for them below, then the rest by id (the primary
-- key), so a page costs what needs attention, never every endpoint or
-- delivery (store/endpointsort.go).

-- dead: a count of dead deliveries per endpoint (and its consumer, for the
-- filtered order), kept by the triggers below wherever a delivery enters
-- or leaves 'dead': an outcome, a disable, a replay, a purge. Nothing is
-- written on ingest, which never makes a dead delivery, nor by claims,
-- cancels or an endpoint's deletion, which move no delivery in or out of
-- dead. A deleted endpoint's row stays while its dead deliveries do (the
-- history), and lists skip it. A row whose count falls to 0 stays, out of
-- the partial indexes. SQLite has one writer and row triggers: each
-- delivery moving adds or takes one.
CREATE TABLE endpoint_dead (
    endpoint_id TEXT PRIMARY KEY,
    consumer_id TEXT NOT NULL,
    dead        INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- The order itself: (dead, id) walked backwards is most dead first, ties
-- newest first; within a consumer, its range of the second.
CREATE INDEX endpoint_dead_rank ON endpoint_dead (dead, endpoint_id) WHERE dead > 0;
CREATE INDEX endpoint_dead_consumer ON endpoint_dead (consumer_id, dead, endpoint_id) WHERE dead > 0;

INSERT INTO endpoint_dead (endpoint_id, consumer_id, dead)
SELECT endpoint_id, min(consumer_id), count(*)
FROM deliveries
WHERE status = 'dead'
GROUP BY endpoint_id;

CREATE TRIGGER deliveries_dead_insert AFTER INSERT ON deliveries
WHEN NEW.status = 'dead'
BEGIN
    INSERT INTO endpoint_dead (endpoint_id, consumer_id, dead) VALUES (NEW.endpoint_id, NEW.consumer_id, 1)
    ON CONFLICT (endpoint_id) DO UPDATE SET dead = dead + 1;
END;

CREATE TRIGGER deliveries_dead_enter AFTER UPDATE OF status ON deliveries
WHEN NEW.status = 'dead' AND OLD.status <> 'dead'
BEGIN
    INSERT INTO endpoint_dead (endpoint_id, consumer_id, dead) VALUES (NEW.endpoint_id, NEW.consumer_id, 1)
    ON CONFLICT (endpoint_id) DO UPDATE SET dead = dead + 1;
END;

CREATE TRIGGER deliveries_dead_leave AFTER UPDATE OF status ON deliveries
WHEN OLD.status = 'dead' AND NEW.status <> 'dead'
BEGIN
    UPDATE endpoint_dead SET dead = dead - 1 WHERE endpoint_id = OLD.endpoint_id;
END;

CREATE TRIGGER deliveries_dead_delete AFTER DELETE ON deliveries
WHEN OLD.status = 'dead'
BEGIN
    UPDATE endpoint_dead SET dead = dead - 1 WHERE endpoint_id = OLD.endpoint_id;
END;

-- due: the endpoint queue's marks in (due_at, id) order, so endpoints due
-- at the same moment (one ingest fans out to many) page by id without a
-- sort. It replaces endpoint_queue_due, its prefix.
CREATE INDEX endpoint_queue_rank ON endpoint_queue (due_at, endpoint_id);
DROP INDEX endpoint_queue_due;

-- health: the breaker state and the last failure's time, read out of the
-- health document by columns of their own (virtual: computed on read), so
-- they can be indexed. They change only when the breaker turns or an
-- attempt fails.
ALTER TABLE endpoints ADD COLUMN breaker_state TEXT
    GENERATED ALWAYS AS (coalesce(json_extract(health, '$.breaker_state'), 'closed')) VIRTUAL;
ALTER TABLE endpoints ADD COLUMN last_failure_at INTEGER
    GENERATED ALWAYS AS (json_extract(health, '$.last_failure_at')) VIRTUAL;

-- Score 0 whatever the attempts: disabled, or the breaker open; with the
-- half-open ones, the endpoints whose breaker is not closed. Few. Each
-- index holds what the order by health asks of an endpoint (its state and
-- consumer), so ranking reads no endpoint's row, only its entries.
CREATE INDEX endpoints_unwell ON endpoints (id, enabled, breaker_state)
    WHERE deleted_at IS NULL AND (enabled = 0 OR breaker_state <> 'closed');
CREATE INDEX endpoints_consumer_unwell ON endpoints (consumer_id, id, enabled, breaker_state)
    WHERE deleted_at IS NULL AND (enabled = 0 OR breaker_state <> 'closed');
-- The endpoints that failed an attempt lately: a range from an hour ago.
CREATE INDEX endpoints_failed ON endpoints (last_failure_at, id, enabled, breaker_state, consumer_id)
    WHERE deleted_at IS NULL AND last_failure_at IS NOT NULL;
