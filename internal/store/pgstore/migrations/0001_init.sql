-- Herald's first schema. Every object is created unqualified, so it lands in
-- whatever schema search_path selects.

CREATE TABLE settings (
    key   text PRIMARY KEY,
    value text NOT NULL
);

-- endpoints: list-valued settings are configuration, not payload, so jsonb
-- and arrays are fine here. Durations are nanoseconds.
CREATE TABLE endpoints (
    id                         text PRIMARY KEY,
    consumer_id                text NOT NULL,
    url                        text NOT NULL,
    description                text NOT NULL,
    event_types                text[],
    secret                     text NOT NULL,
    previous_secret            text NOT NULL DEFAULT '',
    previous_secret_expires_at timestamptz,
    enabled                    boolean NOT NULL,
    disabled_reason            text NOT NULL DEFAULT '',
    timeout_ns                 bigint NOT NULL,
    retry_schedule_ns          bigint[],
    retry_exponential          jsonb,
    retry_client_errors        boolean NOT NULL,
    rate_limit                 jsonb,
    max_in_flight              integer NOT NULL,
    signature_scheme           text NOT NULL,
    headers                    jsonb,
    created_at                 timestamptz NOT NULL,
    updated_at                 timestamptz NOT NULL
);

CREATE INDEX endpoints_consumer_idx ON endpoints (consumer_id, id);

-- events: the payload is bytea, the exact bytes accepted (invariant 5).
CREATE TABLE events (
    id              text PRIMARY KEY,
    consumer_id     text NOT NULL,
    event_type      text NOT NULL,
    payload         bytea NOT NULL,
    idempotency_key text,
    created_at      timestamptz NOT NULL
);

CREATE UNIQUE INDEX events_idempotency_idx ON events (consumer_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX events_consumer_idx ON events (consumer_id, id);

-- deliveries: due_at is the one column claims look at. For a pending row it
-- is when the next attempt is due; for a delivering row, when its lease
-- expires; it is NULL in terminal states. lease_token grows on every claim
-- and fences every write that ends one (invariant 10). endpoint_id has no
-- foreign key: deleting an endpoint keeps its delivery history.
CREATE TABLE deliveries (
    id               text PRIMARY KEY,
    event_id         text NOT NULL REFERENCES events (id),
    endpoint_id      text NOT NULL,
    consumer_id      text NOT NULL,
    event_type       text NOT NULL,
    status           text NOT NULL
        CHECK (status IN ('pending', 'delivering', 'delivered', 'dead', 'cancelled')),
    attempt_count    integer NOT NULL DEFAULT 0,
    due_at           timestamptz,
    lease_token      bigint NOT NULL DEFAULT 0,
    last_status_code integer NOT NULL DEFAULT 0,
    last_error       text NOT NULL DEFAULT '',
    dead_reason      text NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    delivered_at     timestamptz
);

CREATE INDEX deliveries_due_idx ON deliveries (due_at)
    WHERE status IN ('pending', 'delivering');
CREATE INDEX deliveries_endpoint_idx ON deliveries (endpoint_id, id);
CREATE INDEX deliveries_event_idx ON deliveries (event_id);
CREATE INDEX deliveries_consumer_idx ON deliveries (consumer_id, id);
CREATE INDEX deliveries_status_idx ON deliveries (status, id);

CREATE TABLE attempts (
    id           text PRIMARY KEY,
    delivery_id  text NOT NULL REFERENCES deliveries (id),
    endpoint_id  text NOT NULL,
    number       integer NOT NULL,
    attempted_at timestamptz NOT NULL,
    duration_ns  bigint NOT NULL,
    status_code  integer NOT NULL,
    response     bytea,
    error        text NOT NULL
);

CREATE INDEX attempts_delivery_idx ON attempts (delivery_id, id);
