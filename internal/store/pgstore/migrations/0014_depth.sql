-- The depth series (store.DepthStore): once a minute, the queue's depth as
-- GET /v1/stats?counts=false measures it. One row a minute, whatever the
-- number of nodes: the first node to sample a minute writes its row
-- (INSERT ... ON CONFLICT (minute) DO NOTHING), and the others find it and
-- measure nothing. The purge (internal/maintenance) deletes minutes older
-- than a day and an hour with the activity series', so the table stays at
-- about 1,500 rows.
CREATE TABLE depth_minutes (
    minute         timestamptz NOT NULL PRIMARY KEY,
    due_now        bigint NOT NULL,
    oldest_due_ms  bigint NOT NULL,
    dead           bigint NOT NULL
);
