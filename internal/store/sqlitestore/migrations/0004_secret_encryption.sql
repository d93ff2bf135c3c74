-- Endpoint secrets sealed at rest. secrets_encrypted says whether a row's
-- secret and previous_secret are sealed (enc:v1:<key id>:..., AES-256-GCM
-- under Herald's key ring, kept outside the database) or plain, as every
-- row from before is; Herald seals the plain ones at start once it has a
-- key. A column, not a look at the text: a secret an operator chose may
-- look like anything. The index finds the plain rows left, so that look
-- costs nothing once there are none.
ALTER TABLE endpoints ADD COLUMN secrets_encrypted INTEGER NOT NULL DEFAULT 0
    CHECK (secrets_encrypted IN (0, 1));
CREATE INDEX endpoints_plain_secrets ON endpoints (id) WHERE secrets_encrypted = 0;
