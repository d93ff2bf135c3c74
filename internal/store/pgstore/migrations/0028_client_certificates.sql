-- An endpoint's client certificate (PEM), presented to receivers that ask
-- for one (mutual TLS), and its private key. The key is sealed under the
-- key ring when Herald has one (enc:v1:<key id>:..., as secrets are); a
-- PEM key never begins so, so the text says which it is. '' is none.
ALTER TABLE endpoints
    ADD COLUMN client_certificate text NOT NULL DEFAULT '',
    ADD COLUMN client_key text NOT NULL DEFAULT '';

-- Both are configuration (0022_endpoints_changed.sql): a change moves
-- config_version. A trigger of their own, so that the one of 0022 (which
-- other columns may replace) need not name them; when both fire, each sets
-- the same OLD.config_version + 1.
CREATE TRIGGER endpoints_client_certificate_version BEFORE UPDATE ON endpoints
    FOR EACH ROW
    WHEN ((OLD.client_certificate, OLD.client_key) IS DISTINCT FROM (NEW.client_certificate, NEW.client_key))
    EXECUTE FUNCTION herald_endpoint_config_version();

-- The plain client keys left to seal (as endpoints_plain_secrets).
CREATE INDEX endpoints_plain_client_keys ON endpoints (id)
    WHERE client_key <> '' AND left(client_key, 7) <> 'enc:v1:';
