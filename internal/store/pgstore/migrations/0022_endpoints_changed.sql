-- An ingest may fan out from the endpoints a node read before, in one
-- round trip, instead of reading them first (endpointcache.go). Its
-- statement compares each consumer's enabled endpoints, as ids and
-- configuration versions, with what the node read, and calls
-- herald_endpoints_changed for a consumer whose endpoints differ: the
-- error rolls the ingest back, and the node reads the endpoints and
-- writes the ingest again.
--
-- config_version counts the changes of an endpoint's configuration:
-- every column but its state (health, blocked_until, the token bucket and
-- the columns generated from the health), which outcome writes and
-- claims change all the time. It moves whatever clock the writer gives
-- updated_at, and whichever node, of this release or an earlier one,
-- writes. A new column of endpoints belongs in the WHEN below unless it
-- is state (TestConfigVersionCoversTheConfiguration).
ALTER TABLE endpoints ADD COLUMN config_version bigint NOT NULL DEFAULT 0;

CREATE FUNCTION herald_endpoint_config_version() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.config_version := OLD.config_version + 1;
    RETURN NEW;
END
$$;

CREATE TRIGGER endpoints_config_version BEFORE UPDATE ON endpoints
    FOR EACH ROW
    WHEN ((OLD.id, OLD.consumer_id, OLD.url, OLD.description, OLD.event_types, OLD.secret,
            OLD.previous_secret, OLD.previous_secret_expires_at, OLD.enabled, OLD.disabled_reason,
            OLD.timeout_ns, OLD.retry_schedule_ns, OLD.retry_exponential, OLD.retry_client_errors,
            OLD.rate_limit, OLD.max_in_flight, OLD.signature_scheme, OLD.headers, OLD.created_at,
            OLD.updated_at, OLD.ordering, OLD.auto_disable_after_failures, OLD.auto_disable_after_ns,
            OLD.secrets_encrypted)
        IS DISTINCT FROM
        (NEW.id, NEW.consumer_id, NEW.url, NEW.description, NEW.event_types, NEW.secret,
            NEW.previous_secret, NEW.previous_secret_expires_at, NEW.enabled, NEW.disabled_reason,
            NEW.timeout_ns, NEW.retry_schedule_ns, NEW.retry_exponential, NEW.retry_client_errors,
            NEW.rate_limit, NEW.max_in_flight, NEW.signature_scheme, NEW.headers, NEW.created_at,
            NEW.updated_at, NEW.ordering, NEW.auto_disable_after_failures, NEW.auto_disable_after_ns,
            NEW.secrets_encrypted))
    EXECUTE FUNCTION herald_endpoint_config_version();

CREATE FUNCTION herald_endpoints_changed(consumer text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the endpoints of consumer % changed since this node read them', consumer
        USING ERRCODE = 'HE001';
END
$$;
