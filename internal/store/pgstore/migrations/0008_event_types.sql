-- The event type catalog (API.md, "Event types"): what the operator's
-- event types mean, an example payload and, optionally, a JSON Schema that
-- ingest checks payloads against. schema and example are kept as the text
-- given (NULL: none). Herald's own herald.* types are built in, not stored.
CREATE TABLE event_types (
    name         text COLLATE "C" PRIMARY KEY CHECK (name <> ''),
    description  text NOT NULL,
    schema       text,
    example      text,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL
);

-- One row: the catalog's generation, moved on by every write to
-- event_types in the same transaction. Each node caches the compiled
-- schemas and reads this number (one row by its key) to learn of changes
-- made on any node.
CREATE TABLE event_type_generation (
    id          integer PRIMARY KEY CHECK (id = 1),
    generation  bigint NOT NULL
);
INSERT INTO event_type_generation (id, generation) VALUES (1, 0);
