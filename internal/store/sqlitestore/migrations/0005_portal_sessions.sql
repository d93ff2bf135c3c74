-- Portal links and the browser sessions they become (API.md, "Portal
-- sessions"). Only the SHA-256 of the link's token (link_hash) and of the
-- session's token (session_hash) are kept. A link is opened once: the
-- exchange sets exchanged_at and session_hash in one conditional UPDATE.
-- A revoked or ended session's row is deleted.
CREATE TABLE portal_sessions (
    id                 TEXT PRIMARY KEY,
    consumer_id        TEXT NOT NULL CHECK (consumer_id <> ''),
    link_hash          BLOB NOT NULL UNIQUE,
    link_expires_at    INTEGER NOT NULL,
    session_hash       BLOB UNIQUE,
    exchanged_at       INTEGER,
    expires_at         INTEGER,
    created_at         INTEGER NOT NULL,
    CHECK ((exchanged_at IS NULL) = (session_hash IS NULL)),
    CHECK ((exchanged_at IS NULL) = (expires_at IS NULL))
) STRICT;

CREATE INDEX portal_sessions_consumer ON portal_sessions (consumer_id);
