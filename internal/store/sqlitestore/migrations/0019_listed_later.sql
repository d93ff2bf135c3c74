-- The listing indexes of the history, a consumer's events and deliveries
-- and an endpoint's deliveries, hold a row only once the lister has moved
-- it there (see list.go): a new row is unlisted (1) and found through the
-- small index of unlisted rows, which ids keep in order of arrival, until
-- the lister's next pass sets it to NULL in one transaction with the rows
-- that arrived beside it. Each insert into a listing index lands on its
-- consumer's or endpoint's own page, so written one at a time they were a
-- page write each per delivery; written in a pass they share those pages.
-- Rows kept from before are listed already (NULL).
ALTER TABLE events ADD COLUMN unlisted INTEGER CHECK (unlisted = 1);
ALTER TABLE deliveries ADD COLUMN unlisted INTEGER CHECK (unlisted = 1);

DROP INDEX events_consumer;
CREATE INDEX events_consumer ON events (consumer_id, id) WHERE unlisted IS NULL;
CREATE INDEX events_unlisted ON events (id) WHERE unlisted = 1;

DROP INDEX deliveries_endpoint;
DROP INDEX deliveries_consumer;
CREATE INDEX deliveries_endpoint ON deliveries (endpoint_id, id) WHERE unlisted IS NULL;
CREATE INDEX deliveries_consumer ON deliveries (consumer_id, id) WHERE unlisted IS NULL;
CREATE INDEX deliveries_unlisted ON deliveries (id) WHERE unlisted = 1;
