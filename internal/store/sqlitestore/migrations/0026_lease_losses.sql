-- How many times a delivery's lease was lost: a claim that takes it while
-- it is still delivering under an expired lease (its node died or froze
-- before writing an outcome) adds one, in the transaction that leases it
-- (countLeaseLosses), and once store.LeaseLossesEnd says so the claim ends it
-- dead (lease_lost) instead. A replay sets it back to 0.
ALTER TABLE deliveries ADD COLUMN lease_losses INTEGER NOT NULL DEFAULT 0;
