-- Portal links and the browser sessions they become (API.md, "Portal
-- sessions"). Only the SHA-256 of the link's token (link_hash) and of the
-- session's token (session_hash) are kept. A link is opened once: the
-- exchange sets exchanged_at and session_hash in one conditional UPDATE.
-- A revoked or ended session's row is deleted.
CREATE TABLE portal_sessions (
    id                 text PRIMARY KEY,
    consumer_id        text NOT NULL CHECK (consumer_id <> ''),
    link_hash          bytea NOT NULL UNIQUE CHECK (length(link_hash) = 32),
    link_expires_at    timestamptz NOT NULL,
    session_hash       bytea UNIQUE CHECK (length(session_hash) = 32),
    exchanged_at       timestamptz,
    expires_at         timestamptz,
    created_at         timestamptz NOT NULL,
    CHECK ((exchanged_at IS NULL) = (session_hash IS NULL)),
    CHECK ((exchanged_at IS NULL) = (expires_at IS NULL))
);

CREATE INDEX portal_sessions_consumer_idx ON portal_sessions (consumer_id);
