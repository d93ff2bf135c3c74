-- An outcome write of plain successes (completePlain) goes in one round
-- trip: its statements and its COMMIT are sent together, before anything
-- is read back. What made it stop half way before (an endpoint whose
-- health a success changes, or an outcome whose lease was lost) now
-- calls herald_outcomes_not_plain, whose error rolls the transaction
-- back, and the node writes the outcomes again on the breaker's path.
--
-- That write keeps the delivery queue itself, as ingest and claims do
-- (migrations 0020 and 0021): it deletes the queue rows of the
-- deliveries it ends, in the statement that ends them, and sets
-- herald.claim_queues for its transaction, so that the three statement
-- triggers on updates of deliveries, which a success needs nothing else
-- of (no endpoint to mark due, no dead delivery to count), do not run.
CREATE FUNCTION herald_outcomes_not_plain(why text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'outcomes are not plain successes: %', why
        USING ERRCODE = 'HE002';
END
$$;
