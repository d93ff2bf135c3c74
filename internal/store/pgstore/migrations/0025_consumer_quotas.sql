-- What each consumer spent of its quotas (store.QuotaStore): per consumer
-- and kind (test_event, confirmation_mail), the times within the quota's
-- window, oldest first (store.QuotaSpend keeps no more than the limit).
-- A take locks the row, so nodes asking at once are granted no more than
-- the limit together.
CREATE TABLE consumer_quotas (
    consumer_id  text NOT NULL,
    kind         text NOT NULL,
    spent        timestamptz[] NOT NULL,
    PRIMARY KEY (consumer_id, kind)
);
