-- The depth series (store.DepthStore): once a minute, the queue's depth as
-- GET /v1/stats?counts=false measures it. One row a minute: SQLite has one
-- node, which writes it unless the minute has one already. The purge
-- (internal/maintenance) deletes minutes older than a day and an hour with
-- the activity series', so the table stays at about 1,500 rows.
CREATE TABLE depth_minutes (
    minute         INTEGER NOT NULL PRIMARY KEY, -- unix seconds of the minute's start
    due_now        INTEGER NOT NULL,
    oldest_due_ms  INTEGER NOT NULL,
    dead           INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
