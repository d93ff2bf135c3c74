-- Herald's first schema. Times are INTEGER unix microseconds (UTC);
-- durations INTEGER nanoseconds; list-valued endpoint settings JSON text.

CREATE TABLE settings (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;

CREATE TABLE endpoints (
    id                         TEXT PRIMARY KEY,
    consumer_id                TEXT NOT NULL,
    url                        TEXT NOT NULL,
    description                TEXT NOT NULL,
    event_types                TEXT NOT NULL, -- JSON array of patterns
    secret                     TEXT NOT NULL,
    previous_secret            TEXT NOT NULL,
    previous_secret_expires_at INTEGER,
    enabled                    INTEGER NOT NULL,
    disabled_reason            TEXT NOT NULL,
    timeout_ns                 INTEGER NOT NULL,
    retry_schedule             TEXT NOT NULL, -- JSON array of nanoseconds, or null
    retry_exponential          TEXT NOT NULL, -- JSON object, or null
    retry_client_errors        INTEGER NOT NULL,
    rate_limit                 TEXT NOT NULL, -- JSON object, or null
    max_in_flight              INTEGER NOT NULL,
    signature_scheme           TEXT NOT NULL,
    headers                    TEXT NOT NULL, -- JSON object, or null
    created_at                 INTEGER NOT NULL,
    updated_at                 INTEGER NOT NULL,
    -- A deleted endpoint keeps its row (without its secrets) so that the
    -- history of its deliveries stays whole.
    deleted_at                 INTEGER
) STRICT;

CREATE INDEX endpoints_consumer ON endpoints (consumer_id, id) WHERE deleted_at IS NULL;

CREATE TABLE events (
    id              TEXT PRIMARY KEY,
    consumer_id     TEXT NOT NULL,
    event_type      TEXT NOT NULL,
    payload         BLOB NOT NULL, -- the exact bytes accepted
    idempotency_key TEXT,          -- NULL when the caller gave none
    created_at      INTEGER NOT NULL
) STRICT;

CREATE UNIQUE INDEX events_idempotency ON events (consumer_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX events_consumer ON events (consumer_id, id);
CREATE INDEX events_created ON events (created_at);

CREATE TABLE deliveries (
    id               TEXT PRIMARY KEY,
    event_id         TEXT NOT NULL REFERENCES events (id),
    endpoint_id      TEXT NOT NULL REFERENCES endpoints (id),
    consumer_id      TEXT NOT NULL,
    event_type       TEXT NOT NULL,
    status           TEXT NOT NULL
        CHECK (status IN ('pending', 'delivering', 'delivered', 'dead', 'cancelled')),
    attempt_count    INTEGER NOT NULL,
    -- The one time claims look at: for pending, when the next attempt is
    -- due; for delivering, when the lease expires; NULL when terminal.
    due_at           INTEGER,
    -- Incremented by every claim; completes and releases must carry it.
    lease_token      INTEGER NOT NULL,
    last_status_code INTEGER NOT NULL,
    last_error       TEXT NOT NULL,
    dead_reason      TEXT NOT NULL,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    delivered_at     INTEGER
) STRICT;

CREATE INDEX deliveries_due ON deliveries (due_at, id) WHERE status IN ('pending', 'delivering');
CREATE INDEX deliveries_event ON deliveries (event_id);
CREATE INDEX deliveries_endpoint ON deliveries (endpoint_id, id);
CREATE INDEX deliveries_consumer ON deliveries (consumer_id, id);
CREATE INDEX deliveries_status ON deliveries (status, id);

CREATE TABLE attempts (
    id           TEXT PRIMARY KEY,
    delivery_id  TEXT NOT NULL REFERENCES deliveries (id),
    endpoint_id  TEXT NOT NULL,
    number       INTEGER NOT NULL,
    attempted_at INTEGER NOT NULL,
    duration_ns  INTEGER NOT NULL,
    status_code  INTEGER NOT NULL,
    response     BLOB NOT NULL,
    error        TEXT NOT NULL
) STRICT;

CREATE INDEX attempts_delivery ON attempts (delivery_id, id);
