-- Updates of deliveries stay heap-only. A delivery's row is written three
-- times: at ingest, by its claim (delivering, the lease) and by its
-- outcome. While status was indexed (deliveries_status_idx, and the
-- predicate of deliveries_dead_idx), each of those updates put a new entry
-- in every index of deliveries, and left as many dead ones for vacuum to
-- find: with autovacuum on, vacuuming those indexes was the work that grew
-- with history; with it off, they bloated. Now no index of deliveries
-- names a column an update changes, so an update writes the row's new
-- version on its own page (HOT), and the version before is pruned there,
-- by whichever statement next reads the page, without a vacuum.
--
-- What the status indexes served is kept elsewhere: the live deliveries
-- are delivery_queue (migration 0017), and the dead ones dead_deliveries
-- below, kept by the trigger that keeps endpoint_dead (migration 0015).
-- Listing by another status walks deliveries by id (or by endpoint,
-- consumer or event) and filters.
CREATE TABLE dead_deliveries (
    delivery_id text PRIMARY KEY,
    endpoint_id text NOT NULL,
    consumer_id text NOT NULL
);
CREATE INDEX dead_deliveries_endpoint_idx ON dead_deliveries (endpoint_id, delivery_id);
CREATE INDEX dead_deliveries_consumer_idx ON dead_deliveries (consumer_id, delivery_id);

INSERT INTO dead_deliveries (delivery_id, endpoint_id, consumer_id)
SELECT id, endpoint_id, consumer_id FROM deliveries WHERE status = 'dead';

-- herald_endpoint_dead_count (migration 0015) keeps dead_deliveries too,
-- in the same statements that move deliveries in or out of dead.
CREATE OR REPLACE FUNCTION herald_endpoint_dead_count() RETURNS trigger
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
        INSERT INTO dead_deliveries (delivery_id, endpoint_id, consumer_id)
        SELECT n.id, n.endpoint_id, n.consumer_id
        FROM new_rows n
        WHERE n.status = 'dead'
        ORDER BY n.id;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO endpoint_dead AS d (endpoint_id, consumer_id, dead)
        SELECT o.endpoint_id, min(o.consumer_id), -count(*)
        FROM old_rows o
        WHERE o.status = 'dead'
        GROUP BY o.endpoint_id
        ORDER BY o.endpoint_id
        ON CONFLICT (endpoint_id) DO UPDATE SET dead = d.dead + excluded.dead;
        DELETE FROM dead_deliveries x
        USING old_rows o
        WHERE x.delivery_id = o.id AND o.status = 'dead';
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
        DELETE FROM dead_deliveries x
        USING new_rows n
        WHERE x.delivery_id = n.id AND n.status <> 'dead';
        INSERT INTO dead_deliveries (delivery_id, endpoint_id, consumer_id)
        SELECT n.id, n.endpoint_id, n.consumer_id
        FROM new_rows n
        WHERE n.status = 'dead'
        ORDER BY n.id
        ON CONFLICT (delivery_id) DO NOTHING;
    END IF;
    RETURN NULL;
END
$$;

DROP INDEX deliveries_status_idx;
DROP INDEX deliveries_dead_idx;

-- Room on each page for the new versions of its rows: a row inserted
-- there is updated twice within seconds (its claim, its outcome), and a
-- version that does not fit on the same page is not heap-only. Pages
-- written before this keep their fill; the table's new pages get it.
ALTER TABLE deliveries SET (fillfactor = 75);
