-- API keys made through /v1/api-keys. Only the SHA-256 of a key is kept
-- (key_hash); prefix is its first characters, so a person can recognise it.
-- consumer_id is '' for an operator key. A revoked key's row is deleted.
CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    scope        TEXT NOT NULL CHECK (scope IN ('operator', 'consumer')),
    consumer_id  TEXT NOT NULL,
    key_hash     BLOB NOT NULL UNIQUE,
    prefix       TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    CHECK ((scope = 'consumer') = (consumer_id <> ''))
) STRICT;

CREATE INDEX api_keys_consumer ON api_keys (consumer_id, id);
