-- How many times a delivery's lease was lost: a claim that takes it while
-- it is still delivering under an expired lease (its node died or froze
-- before writing an outcome) adds one, in the update that leases it
-- (takeSQL), and once store.LeaseLossesEnd says so the claim ends it dead
-- (lease_lost) instead. A replay sets it back to 0. Adding a column with
-- a constant default rewrites nothing, and nodes of an earlier release,
-- which do not name it, go on as before (it only grows then).
ALTER TABLE deliveries ADD COLUMN lease_losses integer NOT NULL DEFAULT 0;
