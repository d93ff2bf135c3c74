-- The token buckets of the API's request limits that all nodes share
-- (store.RequestBucketStore): per consumer key, portal session or operator
-- key, the tokens left as of at (ratelimit.TakeUpTo decides), and full_at,
-- when the bucket will have refilled, past which a purge deletes the row
-- (a missing row is a full bucket). No index but the key: an update then
-- changes no indexed column and stays a HOT update, and a purge reads a
-- table of the keys used in the last few seconds.
CREATE TABLE request_buckets (
    name     text PRIMARY KEY,
    tokens   double precision NOT NULL,
    at       timestamptz NOT NULL,
    full_at  timestamptz NOT NULL
);
