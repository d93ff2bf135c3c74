-- The endpoints table sorted by health, due and dead
-- (GET /v1/endpoints?sort=health|-health|due|-dead). None of the three is a
-- column: each order puts first the endpoints that need attention, found
-- through what is kept for them below, then the rest by id (the primary
-- key), so a page costs what needs attention, never every endpoint or
-- delivery (store/endpointsort.go).

-- dead: a count of dead deliveries per endpoint (and its consumer, for the
-- filtered order), kept by the trigger below wherever a delivery enters or
-- leaves 'dead': an outcome, a disable, a replay, a purge. Nothing is
-- written on ingest, which never makes a dead delivery, nor by claims,
-- cancels or an endpoint's deletion, which move no delivery in or out of
-- dead. A deleted endpoint's row stays while its dead deliveries do (the
-- history), and lists skip it. A row whose count falls to 0 stays, out of
-- the partial indexes, so an endpoint going in and out of dead is not
-- inserted and deleted each time.
CREATE TABLE endpoint_dead (
    endpoint_id text PRIMARY KEY,
    consumer_id text NOT NULL,
    dead        bigint NOT NULL
);

-- The order itself: (dead, id) walked backwards is most dead first, ties
-- newest first; within a consumer, its range of the second.
CREATE INDEX endpoint_dead_rank_idx ON endpoint_dead (dead, endpoint_id) WHERE dead > 0;
CREATE INDEX endpoint_dead_consumer_idx ON endpoint_dead (consumer_id, dead, endpoint_id) WHERE dead > 0;

INSERT INTO endpoint_dead (endpoint_id, consumer_id, dead)
SELECT endpoint_id, min(consumer_id), count(*)
FROM deliveries
WHERE status = 'dead'
GROUP BY endpoint_id;

-- One statement's change, aggregated per endpoint: a batch of outcomes
-- writes each of its endpoints' rows once. The rows are written in
-- endpoint id order, so two statements never lock two rows in opposite
-- orders. A transaction that writes them in several statements (an
-- outcome batch, then a disable) holds its endpoints' rows in endpoints
-- locked first (FOR UPDATE, in id order), and so does every other writer
-- of dead deliveries (FOR SHARE for a replay, FOR KEY SHARE for the
-- purge): the counts are never what two writers wait on each other for.
CREATE FUNCTION herald_endpoint_dead_count() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- Most statements move nothing in or out of dead (an ingest, a claim,
    -- an outcome that delivers): a look at the transition rows ends them
    -- before any write is planned. (Each branch names only the transition
    -- tables its event has.)
    IF TG_OP = 'INSERT' THEN
        IF NOT EXISTS (SELECT 1 FROM new_rows n WHERE n.status = 'dead') THEN
            RETURN NULL;
        END IF;
    ELSIF TG_OP = 'DELETE' THEN
        IF NOT EXISTS (SELECT 1 FROM old_rows o WHERE o.status = 'dead') THEN
            RETURN NULL;
        END IF;
    ELSIF NOT EXISTS (SELECT 1 FROM new_rows n WHERE n.status = 'dead')
        AND NOT EXISTS (SELECT 1 FROM old_rows o WHERE o.status = 'dead') THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO endpoint_dead AS d (endpoint_id, consumer_id, dead)
        SELECT n.endpoint_id, min(n.consumer_id), count(*)
        FROM new_rows n
        WHERE n.status = 'dead'
        GROUP BY n.endpoint_id
        ORDER BY n.endpoint_id
        ON CONFLICT (endpoint_id) DO UPDATE SET dead = d.dead + excluded.dead;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO endpoint_dead AS d (endpoint_id, consumer_id, dead)
        SELECT o.endpoint_id, min(o.consumer_id), -count(*)
        FROM old_rows o
        WHERE o.status = 'dead'
        GROUP BY o.endpoint_id
        ORDER BY o.endpoint_id
        ON CONFLICT (endpoint_id) DO UPDATE SET dead = d.dead + excluded.dead;
    ELSE
        INSERT INTO endpoint_dead AS d (endpoint_id, consumer_id, dead)
        SELECT c.endpoint_id, min(c.consumer_id), sum(c.n)
        FROM (
            SELECT n.endpoint_id, n.consumer_id, 1 AS n FROM new_rows n WHERE n.status = 'dead'
            UNION ALL
            SELECT o.endpoint_id, o.consumer_id, -1 AS n FROM old_rows o WHERE o.status = 'dead'
        ) AS c
        GROUP BY c.endpoint_id
        HAVING sum(c.n) <> 0
        ORDER BY c.endpoint_id
        ON CONFLICT (endpoint_id) DO UPDATE SET dead = d.dead + excluded.dead;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER deliveries_dead_insert AFTER INSERT ON deliveries
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION herald_endpoint_dead_count();
CREATE TRIGGER deliveries_dead_update AFTER UPDATE ON deliveries
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION herald_endpoint_dead_count();
CREATE TRIGGER deliveries_dead_delete AFTER DELETE ON deliveries
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION herald_endpoint_dead_count();

-- due: the endpoint queue's marks in (due_at, id) order, so endpoints due
-- at the same moment (one ingest fans out to many) page by id without a
-- sort. It replaces endpoint_queue_due_idx, its prefix.
CREATE INDEX endpoint_queue_rank_idx ON endpoint_queue (due_at, endpoint_id);
DROP INDEX endpoint_queue_due_idx;

-- health: the breaker state and the last failure's time, out of the
-- health document into columns of their own, so they can be indexed.
-- They are generated from health, so every writer of it keeps them right,
-- and they change only when the breaker turns or an attempt fails: an
-- endpoint's health written after a success leaves them (and so their
-- indexes) as they were, and that update stays a heap-only one.
-- herald_health_time reads a time as the health document holds it (RFC
-- 3339 with its offset, from Go), so its result depends on no setting and
-- it can be declared immutable.
CREATE FUNCTION herald_health_time(t text) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE RETURNS NULL ON NULL INPUT
AS $$ SELECT t::timestamptz $$;

ALTER TABLE endpoints
    ADD COLUMN breaker_state text
        GENERATED ALWAYS AS (coalesce(health->>'breaker_state', 'closed')) STORED,
    ADD COLUMN last_failure_at timestamptz
        GENERATED ALWAYS AS (herald_health_time(health->>'last_failure_at')) STORED;

-- Score 0 whatever the attempts: disabled, or the breaker open; with the
-- half-open ones, the endpoints whose breaker is not closed. Few.
CREATE INDEX endpoints_unwell_idx ON endpoints (id)
    WHERE NOT enabled OR breaker_state <> 'closed';
CREATE INDEX endpoints_consumer_unwell_idx ON endpoints (consumer_id, id)
    WHERE NOT enabled OR breaker_state <> 'closed';
-- The endpoints that failed an attempt lately: a range from an hour ago.
CREATE INDEX endpoints_failed_idx ON endpoints (last_failure_at)
    WHERE last_failure_at IS NOT NULL;
