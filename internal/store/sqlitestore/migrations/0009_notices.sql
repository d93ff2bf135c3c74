-- Notices by e-mail (--smtp-url). consumer_notifications holds the address
-- a consumer is told at ('' once cleared). endpoint_notices holds, per
-- endpoint, when a notice was last mailed about it (microseconds): a node
-- sends only once it has moved sent_at forward with a conditional write,
-- so at most one mail per endpoint per hour goes out.
CREATE TABLE consumer_notifications (
    consumer_id  TEXT PRIMARY KEY,
    email        TEXT NOT NULL,
    updated_at   INTEGER NOT NULL
) STRICT;

CREATE TABLE endpoint_notices (
    endpoint_id  TEXT PRIMARY KEY,
    sent_at      INTEGER NOT NULL
) STRICT;
