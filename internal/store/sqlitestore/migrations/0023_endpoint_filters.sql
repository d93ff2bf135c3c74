-- An endpoint's filter: a CEL expression over event_type, consumer_id and
-- payload, checked at save (internal/filter) and decided at fan-out; ''
-- is none. A change moves endpoints_version (0018), as every change of a
-- row does, so kept endpoints never fan out with an old filter.
ALTER TABLE endpoints ADD COLUMN filter TEXT NOT NULL DEFAULT '';

-- The endpoints an event's fan-out skipped, and why ('filter': its filter
-- was false; 'filter_error': it could not be evaluated). Only events with
-- a skip have rows; they go with their event.
CREATE TABLE event_skips (
    event_id TEXT NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    endpoint_id TEXT NOT NULL,
    reason TEXT NOT NULL,
    PRIMARY KEY (event_id, endpoint_id)
) WITHOUT ROWID;
