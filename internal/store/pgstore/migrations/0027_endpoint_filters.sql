-- An endpoint's filter: a CEL expression over event_type, consumer_id and
-- payload, checked at save (internal/filter) and decided at fan-out; ''
-- is none.
ALTER TABLE endpoints ADD COLUMN filter text NOT NULL DEFAULT '';

-- A filter is configuration (0022_endpoints_changed.sql): a change moves
-- config_version, so an ingest from remembered endpoints never fans out
-- with a filter that has changed. A trigger of its own, as 0028's.
CREATE TRIGGER endpoints_filter_version BEFORE UPDATE ON endpoints
    FOR EACH ROW
    WHEN (OLD.filter IS DISTINCT FROM NEW.filter)
    EXECUTE FUNCTION herald_endpoint_config_version();

-- The endpoints an event's fan-out skipped, and why ('filter': its filter
-- was false; 'filter_error': it could not be evaluated). Only events with
-- a skip have rows; they go with their event (ON DELETE CASCADE, as the
-- purger deletes events).
CREATE TABLE event_skips (
    event_id text NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    endpoint_id text NOT NULL,
    reason text NOT NULL,
    PRIMARY KEY (event_id, endpoint_id)
);
