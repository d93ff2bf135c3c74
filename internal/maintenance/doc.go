// Package maintenance is a node's background upkeep, the work no request
// asks for: every serve and worker node runs a Sampler (depth.go), which
// samples the queue's depth once a minute for the dashboard's charts, and
// a Purger (purge.go), which deletes history older than the retention and
// the charts' old minutes. Both run until their context ends, time
// themselves on the clock they are given, and log a failed round and wait
// for the next one rather than stop. Each file's comment says how its
// half shares the work between nodes.
package maintenance
