-- Operator dashboard sessions (/ui/): made by signing in with an operator
-- key. Only the SHA-256 of the session's token (session_hash) and of the
-- key (key_hash) are kept; the key is checked again on every request, so
-- revoking it ends its sessions. An ended session's row is deleted.
CREATE TABLE operator_sessions (
    id            text PRIMARY KEY,
    session_hash  bytea NOT NULL UNIQUE CHECK (length(session_hash) = 32),
    key_hash      bytea NOT NULL CHECK (length(key_hash) = 32),
    expires_at    timestamptz NOT NULL,
    created_at    timestamptz NOT NULL
);

CREATE INDEX operator_sessions_expires_idx ON operator_sessions (expires_at);
