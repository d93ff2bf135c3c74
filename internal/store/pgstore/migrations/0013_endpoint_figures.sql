-- The endpoints table of the dashboard (GET /v1/endpoints?sort=&include=health).
--
-- Sorting by consumer or URL, alone or within a consumer, is a range of an
-- index (by creation is the primary key's). Text sorts in byte order
-- (COLLATE "C"), as on SQLite, whatever the database's collation.
CREATE INDEX endpoints_consumer_sort_idx ON endpoints (consumer_id COLLATE "C", id COLLATE "C");
CREATE INDEX endpoints_url_idx ON endpoints (url COLLATE "C", id COLLATE "C");
CREATE INDEX endpoints_consumer_url_idx ON endpoints (consumer_id, url COLLATE "C", id COLLATE "C");

-- An endpoint's dead-letter depth: its dead deliveries alone, so counting
-- them walks nothing else (a delivered history of millions costs nothing).
CREATE INDEX deliveries_dead_idx ON deliveries (endpoint_id) WHERE status = 'dead';
