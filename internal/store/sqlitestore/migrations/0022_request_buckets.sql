-- The token buckets of the API's request limits that all nodes share
-- (store.RequestBucketStore): per consumer key, portal session or operator
-- key, the tokens left as of at (microseconds; ratelimit.TakeUpTo
-- decides), and full_at, when the bucket will have refilled, past which a
-- purge deletes the row (a missing row is a full bucket). Takes are write
-- transactions, one at a time.
CREATE TABLE request_buckets (
    name     TEXT PRIMARY KEY,
    tokens   REAL NOT NULL,
    at       INTEGER NOT NULL,
    full_at  INTEGER NOT NULL
) STRICT;
