-- herald: contract
-- Payloads may be stored compressed (store.StoredPayload; on by default,
-- --compress-payloads=false turns it off). Every release from this one
-- reads them; an earlier one would send a compressed payload's bytes as
-- the webhook's body, so it refuses to open this database. Nothing in the
-- schema changes.
SELECT 1;
