-- The endpoints table of the dashboard (GET /v1/endpoints?sort=&include=health).
--
-- Sorting by URL, alone or within a consumer, is a range of an index (by
-- consumer and by creation already have theirs: endpoints_consumer and the
-- primary key).
CREATE INDEX endpoints_url ON endpoints (url, id) WHERE deleted_at IS NULL;
CREATE INDEX endpoints_consumer_url ON endpoints (consumer_id, url, id) WHERE deleted_at IS NULL;

-- An endpoint's dead-letter depth: its dead deliveries alone, so counting
-- them walks nothing else (a delivered history of millions costs nothing).
CREATE INDEX deliveries_dead ON deliveries (endpoint_id) WHERE status = 'dead';

-- The breaker window and the last hour's success rate count an endpoint's
-- attempts by time and by answer: with the status code in the index they
-- are counted from the index alone, never reading the attempts' rows (and
-- their response bodies). It replaces attempts_endpoint, its prefix.
CREATE INDEX attempts_endpoint_status ON attempts (endpoint_id, attempted_at, status_code);
DROP INDEX attempts_endpoint;
