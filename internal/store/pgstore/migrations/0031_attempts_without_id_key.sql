-- Nothing reads an attempt by its id alone: a delivery's attempts are
-- listed, in order, through attempts_delivery_idx (delivery_id, id), and
-- a purge deletes them through their deliveries. The primary key on id
-- cost every attempt one more index entry (88 bytes of WAL a delivery,
-- BENCHMARKS "WAL a delivery") and guarded nothing that ids of 80 random
-- bits after their millisecond do not. Nodes of an earlier release insert
-- attempts without ON CONFLICT, so they go on as before.
ALTER TABLE attempts DROP CONSTRAINT attempts_pkey;
