-- A notification address is mailed notices only once confirmed: a new
-- address is pending (confirmed_at NULL) until the link Herald mailed to
-- it is opened. token_hash is the SHA-256 of the live confirmation token
-- (the token itself is never kept), token_sent_at when it was issued (a
-- resend waits a few minutes after it) and token_expires_at when it stops
-- working; all three NULL while no token was issued for the address.
--
-- Addresses set before confirmation existed stay confirmed (at the time
-- they were set), so an upgrade does not silently stop their mail.
ALTER TABLE consumer_notifications
    ADD COLUMN confirmed_at      timestamptz,
    ADD COLUMN token_hash        bytea,
    ADD COLUMN token_sent_at     timestamptz,
    ADD COLUMN token_expires_at  timestamptz;

UPDATE consumer_notifications SET confirmed_at = updated_at WHERE email <> '';
