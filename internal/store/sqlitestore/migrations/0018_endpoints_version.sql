-- endpoints_version moves with every change of a row of endpoints (its
-- settings, secrets, state, health or token bucket), by whatever process
-- makes it, so that a node may keep the endpoints it read for ingest's
-- fan-out for as long as the count has not moved: one read of it a
-- transaction instead of a read of each consumer's endpoints.
INSERT INTO sequences (name, value) VALUES ('endpoints_version', 0);

CREATE TRIGGER endpoints_version_insert AFTER INSERT ON endpoints
BEGIN
    UPDATE sequences SET value = value + 1 WHERE name = 'endpoints_version';
END;
CREATE TRIGGER endpoints_version_update AFTER UPDATE ON endpoints
BEGIN
    UPDATE sequences SET value = value + 1 WHERE name = 'endpoints_version';
END;
CREATE TRIGGER endpoints_version_delete AFTER DELETE ON endpoints
BEGIN
    UPDATE sequences SET value = value + 1 WHERE name = 'endpoints_version';
END;
