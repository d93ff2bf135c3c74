-- Retention (--retention): the purge walks events in creation order, a
-- batch at a time from where the last one stopped, so it needs events by
-- (created_at, id), the id breaking ties between events created in the same
-- microsecond. This index also serves every range of created_at that the
-- one it replaces served.
DROP INDEX events_created;
CREATE INDEX events_created_id ON events (created_at, id);
