-- Notices by e-mail (--smtp-url). consumer_notifications holds the address
-- a consumer is told at ('' once cleared). endpoint_notices holds, per
-- endpoint, when a notice was last mailed about it: a node sends only once
-- it has moved sent_at forward with a conditional write, so every node
-- together sends at most one mail per endpoint per hour.
CREATE TABLE consumer_notifications (
    consumer_id  text PRIMARY KEY,
    email        text NOT NULL,
    updated_at   timestamptz NOT NULL
);

CREATE TABLE endpoint_notices (
    endpoint_id  text PRIMARY KEY,
    sent_at      timestamptz NOT NULL
);
