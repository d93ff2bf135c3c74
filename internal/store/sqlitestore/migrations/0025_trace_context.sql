-- The span context of the ingest that accepted an event (internal/trace:
-- trace id, span id and flags, 25 bytes), the parent of its attempts'
-- spans. Written only when tracing is on; NULL otherwise.
ALTER TABLE events ADD COLUMN trace_context BLOB;

-- An endpoint that opts out of trace propagation ("trace_propagation":
-- false): its webhooks carry no traceparent. A change moves
-- endpoints_version (0018), as every change of a row does.
ALTER TABLE endpoints ADD COLUMN no_trace_propagation INTEGER NOT NULL DEFAULT 0;
