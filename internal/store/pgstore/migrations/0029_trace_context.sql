-- The span context of the ingest that accepted an event (internal/trace:
-- trace id, span id and flags, 25 bytes), the parent of its attempts'
-- spans. Written only when tracing is on; NULL otherwise, which costs a
-- row nothing.
ALTER TABLE events ADD COLUMN trace_context bytea;

-- An endpoint that opts out of trace propagation ("trace_propagation":
-- false): its webhooks carry no traceparent.
ALTER TABLE endpoints ADD COLUMN no_trace_propagation boolean NOT NULL DEFAULT false;

-- It is configuration (0022_endpoints_changed.sql): a change moves
-- config_version, so remembered endpoints pick it up. A trigger of its
-- own, as 0028's.
CREATE TRIGGER endpoints_trace_propagation_version BEFORE UPDATE ON endpoints
    FOR EACH ROW
    WHEN (OLD.no_trace_propagation IS DISTINCT FROM NEW.no_trace_propagation)
    EXECUTE FUNCTION herald_endpoint_config_version();
