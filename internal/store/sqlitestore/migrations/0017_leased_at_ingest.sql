-- An ingest may insert a delivery already leased to its node (delivering,
-- due when the lease runs out) instead of pending. Its endpoint is marked
-- due no later than that, as for a pending delivery, so that claims find
-- it should the lease run out before an outcome is written.
DROP TRIGGER deliveries_queue_insert;
CREATE TRIGGER deliveries_queue_insert AFTER INSERT ON deliveries
WHEN NEW.status IN ('pending', 'delivering')
BEGIN
    INSERT INTO endpoint_queue (endpoint_id, due_at) VALUES (NEW.endpoint_id, NEW.due_at)
    ON CONFLICT (endpoint_id) DO UPDATE SET due_at = excluded.due_at
        WHERE excluded.due_at < endpoint_queue.due_at;
END;
