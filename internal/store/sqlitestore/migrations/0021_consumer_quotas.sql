-- What each consumer spent of its quotas (store.QuotaStore): per consumer
-- and kind (test_event, confirmation_mail), the times within the quota's
-- window, oldest first, as a JSON array of microseconds (store.QuotaSpend
-- keeps no more than the limit). Takes are write transactions, one at a
-- time.
CREATE TABLE consumer_quotas (
    consumer_id  TEXT NOT NULL,
    kind         TEXT NOT NULL,
    spent        TEXT NOT NULL,
    PRIMARY KEY (consumer_id, kind)
) STRICT;
