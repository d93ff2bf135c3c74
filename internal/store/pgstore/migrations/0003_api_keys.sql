-- API keys made through /v1/api-keys. Only the SHA-256 of a key is kept
-- (key_hash); prefix is its first characters, so a person can recognise it.
-- consumer_id is '' for an operator key. A revoked key's row is deleted.
CREATE TABLE api_keys (
    id           text PRIMARY KEY,
    name         text NOT NULL,
    scope        text NOT NULL CHECK (scope IN ('operator', 'consumer')),
    consumer_id  text NOT NULL,
    key_hash     bytea NOT NULL UNIQUE CHECK (length(key_hash) = 32),
    prefix       text NOT NULL,
    created_at   timestamptz NOT NULL,
    last_used_at timestamptz,
    CHECK ((scope = 'consumer') = (consumer_id <> ''))
);

CREATE INDEX api_keys_consumer_idx ON api_keys (consumer_id, id);
