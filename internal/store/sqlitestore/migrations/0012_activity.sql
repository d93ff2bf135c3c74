-- The activity series (store.ActivityStore): per minute, what the outcome
-- writes did. Each DeliveryCompleteMany adds its batch to the row of its
-- minute and node in its own transaction, so a row is written once per
-- batch of outcomes, never by ingest. SQLite has one writer: node is ''.
-- lat00..lat19 are the attempt latency histogram's buckets
-- (store.LatencyBounds). The purge (internal/maintenance) deletes minutes
-- older than a day and an hour, so the table stays at about 1,500 rows a
-- node.
CREATE TABLE activity_minutes (
    minute     INTEGER NOT NULL, -- unix seconds of the minute's start
    node       TEXT NOT NULL,
    attempts   INTEGER NOT NULL DEFAULT 0,
    succeeded  INTEGER NOT NULL DEFAULT 0,
    failed     INTEGER NOT NULL DEFAULT 0,
    retries    INTEGER NOT NULL DEFAULT 0,
    exhausted  INTEGER NOT NULL DEFAULT 0,
    lat00      INTEGER NOT NULL DEFAULT 0,
    lat01      INTEGER NOT NULL DEFAULT 0,
    lat02      INTEGER NOT NULL DEFAULT 0,
    lat03      INTEGER NOT NULL DEFAULT 0,
    lat04      INTEGER NOT NULL DEFAULT 0,
    lat05      INTEGER NOT NULL DEFAULT 0,
    lat06      INTEGER NOT NULL DEFAULT 0,
    lat07      INTEGER NOT NULL DEFAULT 0,
    lat08      INTEGER NOT NULL DEFAULT 0,
    lat09      INTEGER NOT NULL DEFAULT 0,
    lat10      INTEGER NOT NULL DEFAULT 0,
    lat11      INTEGER NOT NULL DEFAULT 0,
    lat12      INTEGER NOT NULL DEFAULT 0,
    lat13      INTEGER NOT NULL DEFAULT 0,
    lat14      INTEGER NOT NULL DEFAULT 0,
    lat15      INTEGER NOT NULL DEFAULT 0,
    lat16      INTEGER NOT NULL DEFAULT 0,
    lat17      INTEGER NOT NULL DEFAULT 0,
    lat18      INTEGER NOT NULL DEFAULT 0,
    lat19      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, node)
) STRICT, WITHOUT ROWID;
