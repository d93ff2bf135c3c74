-- herald: contract
-- The delivery queue and its built row are written without WAL: the
-- queue's row, its five index entries, its delete and its vacuums cost
-- 690 of 3,490 bytes of WAL a delivery (BENCHMARKS "WAL a delivery").
-- PostgreSQL empties both on crash recovery and on a standby it promotes,
-- and a node makes the queue again from deliveries (migration 0032).
--
-- It contracts the schema: a node of a release without 0032's guards
-- would lease, take FIFO heads and cancel on an emptied queue, so no such
-- node may start once this is applied, and an upgrade goes through the
-- release that brought 0032 (README "Rolling upgrades"). That release
-- also reads compressed payloads, so with this applied every node that
-- can run does, and nodes compress them by default.
ALTER TABLE delivery_queue SET UNLOGGED;
ALTER TABLE delivery_queue_built SET UNLOGGED;
