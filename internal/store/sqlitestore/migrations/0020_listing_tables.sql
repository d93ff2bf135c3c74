-- The listings of the history (a consumer's events, an endpoint's and a
-- consumer's deliveries) become tables of (owner, item) that the lister
-- writes in batches (see list.go), in place of 0019's partial indexes.
-- Listing a row no longer rewrites it (an event's row holds its payload,
-- and its page went to the WAL again): a trigger queues each new row's id
-- and owners in a small table, in order of arrival, and the lister moves a
-- batch of them into the listings and out of the queue in one transaction.
-- The column unlisted of 0019 stays, no longer read or written: dropping
-- it would rewrite every row of the history.
CREATE TABLE consumer_events (
    owner TEXT NOT NULL, -- the event's consumer_id
    item  TEXT NOT NULL, -- the event's id
    PRIMARY KEY (owner, item)
) STRICT, WITHOUT ROWID;

CREATE TABLE endpoint_deliveries (
    owner TEXT NOT NULL, -- the delivery's endpoint_id
    item  TEXT NOT NULL, -- the delivery's id
    PRIMARY KEY (owner, item)
) STRICT, WITHOUT ROWID;

CREATE TABLE consumer_deliveries (
    owner TEXT NOT NULL, -- the delivery's consumer_id
    item  TEXT NOT NULL, -- the delivery's id
    PRIMARY KEY (owner, item)
) STRICT, WITHOUT ROWID;

-- The queues of rows not yet listed, oldest first (n grows).
CREATE TABLE unlisted_events (
    n     INTEGER PRIMARY KEY,
    item  TEXT NOT NULL,
    owner TEXT NOT NULL
) STRICT;

CREATE TABLE unlisted_deliveries (
    n        INTEGER PRIMARY KEY,
    item     TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    consumer TEXT NOT NULL
) STRICT;

-- Every row kept is listed, whether 0019's lister had reached it or not:
-- those it had, in order through its own indexes, the others (a second's
-- worth) through theirs. An upgrade copies the entries once, as many as
-- the rows kept, before Herald starts.
INSERT INTO consumer_events (owner, item)
    SELECT consumer_id, id FROM events INDEXED BY events_consumer WHERE unlisted IS NULL ORDER BY consumer_id, id;
INSERT INTO consumer_events (owner, item)
    SELECT consumer_id, id FROM events INDEXED BY events_unlisted WHERE unlisted = 1;
INSERT INTO endpoint_deliveries (owner, item)
    SELECT endpoint_id, id FROM deliveries INDEXED BY deliveries_endpoint WHERE unlisted IS NULL ORDER BY endpoint_id, id;
INSERT INTO endpoint_deliveries (owner, item)
    SELECT endpoint_id, id FROM deliveries INDEXED BY deliveries_unlisted WHERE unlisted = 1;
INSERT INTO consumer_deliveries (owner, item)
    SELECT consumer_id, id FROM deliveries INDEXED BY deliveries_consumer WHERE unlisted IS NULL ORDER BY consumer_id, id;
INSERT INTO consumer_deliveries (owner, item)
    SELECT consumer_id, id FROM deliveries INDEXED BY deliveries_unlisted WHERE unlisted = 1;

DROP INDEX events_consumer;
DROP INDEX events_unlisted;
DROP INDEX deliveries_endpoint;
DROP INDEX deliveries_consumer;
DROP INDEX deliveries_unlisted;

CREATE TRIGGER events_unlisted_insert AFTER INSERT ON events BEGIN
    INSERT INTO unlisted_events (item, owner) VALUES (new.id, new.consumer_id);
END;

CREATE TRIGGER deliveries_unlisted_insert AFTER INSERT ON deliveries BEGIN
    INSERT INTO unlisted_deliveries (item, endpoint, consumer) VALUES (new.id, new.endpoint_id, new.consumer_id);
END;
