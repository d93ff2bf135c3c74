-- A claim updates the delivery queue's rows of the deliveries it leases
-- itself, in the statement that leases them (takeSQL), where the three
-- statement triggers on updates of deliveries each ran a function of
-- their own, and its statements, in every claim that leased anything: the
-- endpoint queue's mark (migration 0007) and the dead count (0015), which
-- find nothing to do for a lease, and the delivery queue's row (0017).
-- A claim says so by setting herald.claim_queues for its transaction
-- (claimQueuesSQL, sent with its BEGIN), as ingest sets
-- herald.ingest_queues (migration 0020). The triggers stay for every
-- other writer, and for nodes of an earlier release.
DROP TRIGGER deliveries_queue_update ON deliveries;
DROP TRIGGER deliveries_dead_update ON deliveries;
DROP TRIGGER deliveries_live_update ON deliveries;

CREATE TRIGGER deliveries_queue_update AFTER UPDATE ON deliveries
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT
    WHEN (current_setting('herald.claim_queues', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION herald_endpoint_queue_mark();
CREATE TRIGGER deliveries_dead_update AFTER UPDATE ON deliveries
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT
    WHEN (current_setting('herald.claim_queues', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION herald_endpoint_dead_count();
CREATE TRIGGER deliveries_live_update AFTER UPDATE ON deliveries
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT
    WHEN (current_setting('herald.claim_queues', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION herald_delivery_queue_put();
