-- Operator dashboard sessions (/ui/): made by signing in with an operator
-- key. Only the SHA-256 of the session's token (session_hash) and of the
-- key (key_hash) are kept; the key is checked again on every request, so
-- revoking it ends its sessions. An ended session's row is deleted.
CREATE TABLE operator_sessions (
    id            TEXT PRIMARY KEY,
    session_hash  BLOB NOT NULL UNIQUE,
    key_hash      BLOB NOT NULL,
    expires_at    INTEGER NOT NULL,
    created_at    INTEGER NOT NULL
) STRICT;

CREATE INDEX operator_sessions_expires ON operator_sessions (expires_at);
