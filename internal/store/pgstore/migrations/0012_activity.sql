-- The activity series (store.ActivityStore): per minute, what the outcome
-- writes did. Each DeliveryCompleteMany adds its batch to the row of its
-- minute and node in its own transaction, so a row is written once per
-- batch of outcomes, never by ingest. Every node
-- (every open store) writes rows of its own, summed on read, so nodes
-- writing at once never wait for one another's row.
-- lat00..lat19 are the attempt latency histogram's buckets
-- (store.LatencyBounds). The purge (internal/maintenance) deletes minutes
-- older than a day and an hour, so the table stays at about 1,500 rows a
-- node.
CREATE TABLE activity_minutes (
    minute     timestamptz NOT NULL,
    node       text NOT NULL,
    attempts   bigint NOT NULL DEFAULT 0,
    succeeded  bigint NOT NULL DEFAULT 0,
    failed     bigint NOT NULL DEFAULT 0,
    retries    bigint NOT NULL DEFAULT 0,
    exhausted  bigint NOT NULL DEFAULT 0,
    lat00      bigint NOT NULL DEFAULT 0,
    lat01      bigint NOT NULL DEFAULT 0,
    lat02      bigint NOT NULL DEFAULT 0,
    lat03      bigint NOT NULL DEFAULT 0,
    lat04      bigint NOT NULL DEFAULT 0,
    lat05      bigint NOT NULL DEFAULT 0,
    lat06      bigint NOT NULL DEFAULT 0,
    lat07      bigint NOT NULL DEFAULT 0,
    lat08      bigint NOT NULL DEFAULT 0,
    lat09      bigint NOT NULL DEFAULT 0,
    lat10      bigint NOT NULL DEFAULT 0,
    lat11      bigint NOT NULL DEFAULT 0,
    lat12      bigint NOT NULL DEFAULT 0,
    lat13      bigint NOT NULL DEFAULT 0,
    lat14      bigint NOT NULL DEFAULT 0,
    lat15      bigint NOT NULL DEFAULT 0,
    lat16      bigint NOT NULL DEFAULT 0,
    lat17      bigint NOT NULL DEFAULT 0,
    lat18      bigint NOT NULL DEFAULT 0,
    lat19      bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, node)
);
