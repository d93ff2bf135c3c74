-- The event type catalog (API.md, "Event types"): what the operator's
-- event types mean, an example payload and, optionally, a JSON Schema that
-- ingest checks payloads against. schema and example are kept as the text
-- given (NULL: none). Herald's own herald.* types are built in, not stored.
CREATE TABLE event_types (
    name         TEXT PRIMARY KEY CHECK (name <> ''),
    description  TEXT NOT NULL,
    schema       TEXT,
    example      TEXT,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
) STRICT;

-- One row: the catalog's generation, moved on by every write to
-- event_types in the same transaction, so a cache learns of a change by
-- reading one number.
CREATE TABLE event_type_generation (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    generation  INTEGER NOT NULL
) STRICT;
INSERT INTO event_type_generation (id, generation) VALUES (1, 0);
