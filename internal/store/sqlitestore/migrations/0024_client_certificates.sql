-- An endpoint's client certificate (PEM), presented to receivers that ask
-- for one (mutual TLS), and its private key. The key is sealed under the
-- key ring when Herald has one (enc:v1:<key id>:..., as secrets are); a
-- PEM key never begins so, so the text says which it is. '' is none.
ALTER TABLE endpoints ADD COLUMN client_certificate TEXT NOT NULL DEFAULT '';
ALTER TABLE endpoints ADD COLUMN client_key TEXT NOT NULL DEFAULT '';
-- The plain client keys left to seal (as endpoints_plain_secrets).
CREATE INDEX endpoints_plain_client_keys ON endpoints (id)
    WHERE client_key <> '' AND substr(client_key, 1, 7) <> 'enc:v1:';
