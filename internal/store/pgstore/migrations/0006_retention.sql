-- Retention (--retention): the purge walks events in creation order, a
-- batch at a time from where the last one stopped, so it needs events by
-- (created_at, id), the id breaking ties between events created in the same
-- microsecond. The deliveries of each event are found by
-- deliveries_event_idx, and their attempts by attempts_delivery_idx.
CREATE INDEX events_created_idx ON events (created_at, id);
