-- An endpoint's in-flight room is split in shards, so that ingests and
-- claims leasing to one busy endpoint no longer queue behind one lock of
-- its row. Until now every writer that leased (an ingest leasing to the
-- node's dispatcher, a claim) held the endpoint's row FOR NO KEY UPDATE
-- while it counted the endpoint's leased deliveries and leased up to the
-- cap: on an endpoint that takes most of the traffic, one transaction at
-- a time could lease to it, and the others, skipping the locked row,
-- queued their deliveries for a claim, which met the same lock.
--
-- Now the cap is dealt over up to four shards (herald_shard_cap), each a
-- transaction-level advisory lock (class 1213353043, "HRLS"; the second
-- key the hash of schema, endpoint and shard), and a leased delivery's
-- queue row names the shard whose room it took. A writer that leases
-- takes the shards it can lock at once (herald_take_shards, never waiting)
-- until their room covers what it would lease, and counts, under each
-- shard's lock, the leased deliveries of that shard alone:
-- two writers on one shard take turns, writers on different shards lease
-- side by side, and the shards' rooms never sum past the cap. With fewer
-- than four in flight allowed, there are as many shards as the cap; what
-- was leased under a larger cap still counts after it shrank
-- (herald_shard_room).
--
-- The endpoint's row is now held FOR KEY SHARE by a leasing ingest (as by
-- an outcome write of plain successes): it keeps out the writers that
-- decide on the endpoint's health or state (FOR UPDATE: the breaker's
-- path, disabling, deleting), and no one else. Claims still lock their
-- endpoints FOR NO KEY UPDATE, one claimer at a time, for the token bucket
-- and the probes they write back.
ALTER TABLE delivery_queue ADD COLUMN shard smallint NOT NULL DEFAULT 0;

DROP INDEX delivery_queue_leased_idx;
CREATE INDEX delivery_queue_leased_idx ON delivery_queue (endpoint_id, shard, due_at) WHERE leased;

-- herald_shards is how many shards an in-flight cap is dealt over.
CREATE FUNCTION herald_shards(cap int) RETURNS int
LANGUAGE sql IMMUTABLE AS $$
    SELECT least(4, greatest(cap, 1))
$$;

-- herald_shard_cap is shard k's part of cap.
CREATE FUNCTION herald_shard_cap(cap int, k int) RETURNS int
LANGUAGE sql IMMUTABLE AS $$
    SELECT greatest(cap, 1) / herald_shards(cap)
        + CASE WHEN k < greatest(cap, 1) % herald_shards(cap) THEN 1 ELSE 0 END
$$;

-- herald_shard_room is the room left in shard k of the endpoint's cap at
-- t, counting the deliveries leased in each shard whose leases have not
-- run out (one range of delivery_queue_leased_idx each, a shard beyond
-- the cap's number falling to its number modulo that): shard k's part of
-- the cap less its own, and no more than the cap leaves once every
-- delivery leased and every other shard's room are counted. While the
-- cap stands, the second is the first; after it shrank, a shard still
-- over its new part holds the others back until it drained, so that the
-- shards together never pass the cap. The caller holds shard k's lock; the
-- counts read what was committed when the statement that calls it began.
-- ($1 the endpoint, $2 the cap, $3 the shard, $4 t: by number, so that
-- the plans' test can explain the body as it is.)
CREATE FUNCTION herald_shard_room(endpoint text, cap int, k int, t timestamptz) RETURNS int
LANGUAGE sql STABLE AS $$
    SELECT least(
            herald_shard_cap($2, $3) - coalesce(sum(c.n) FILTER (WHERE c.s = $3), 0),
            greatest($2, 1) - coalesce(sum(c.n), 0)
                - coalesce(sum(greatest(herald_shard_cap($2, c.s) - c.n, 0)) FILTER (WHERE c.s <> $3), 0))::int
    FROM (
        SELECT m.p % herald_shards($2) AS s, sum((
            SELECT count(*) FROM (
                SELECT 1 FROM delivery_queue l
                WHERE l.endpoint_id = $1 AND l.leased AND l.shard = m.p::smallint AND l.due_at > $4
                LIMIT greatest($2, 1)) AS z)) AS n
        FROM (VALUES (0), (1), (2), (3)) AS m(p)
        GROUP BY 1
    ) AS c
$$;

-- herald_take_shards locks shards of the endpoint's cap that no other
-- transaction holds and that have room at t, trying them from a random
-- one, until their rooms together reach want, and returns each with its
-- room (none when none could be had). It never waits. Each shard's room
-- is counted after its lock is taken, in a statement of its own, whose
-- snapshot sees every writer that held the lock before: the room is exact
-- while the lock is held, whatever the calling statement's snapshot saw.
-- A shard locked without room stays locked to the end of the
-- transaction, as advisory transaction locks do; no one could lease in it
-- meanwhile anyway.
CREATE FUNCTION herald_take_shards(endpoint text, cap int, t timestamptz, want int)
RETURNS TABLE (shard int, room int)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    n int := herald_shards(cap);
    first int := floor(random() * herald_shards(cap))::int;
    k int;
    r int;
    got int := 0;
BEGIN
    IF want <= 0 THEN
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
