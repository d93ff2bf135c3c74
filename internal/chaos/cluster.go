package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/heraldhooks/herald/internal/heraldproc"
	"github.com/heraldhooks/herald/internal/keyring"
)

// Backends the harness runs Herald on.
const (
	BackendSQLite   = "sqlite"
	BackendPostgres = "postgres"
)

// cluster is the Herald of one run: one serve node (which also takes the
// load), on PostgreSQL two workers beside it and the database itself.
type cluster struct {
	backend string
	dir     string // temporary: the SQLite file
	pg      *pgSet
	nodes   []*node
	api     string
	apiKey  string
}

// clusterOptions are what the nodes run with.
type clusterOptions struct {
	backend     string
	herald      string // the herald binary
	pgBin       string
	replication string // ReplicationSync, ReplicationAsync or ReplicationNone
	standbyLag  time.Duration
	leaseMargin time.Duration
	log         func(string, ...any)
}

// startCluster starts the database (PostgreSQL) and the nodes.
func startCluster(ctx context.Context, o clusterOptions) (*cluster, error) {
	c := &cluster{backend: o.backend}
	dir, err := os.MkdirTemp("", "herald-chaos-")
	if err != nil {
		return nil, fmt.Errorf("make a directory for the run: %w", err)
	}
	c.dir = dir
	var raw [18]byte
	_, _ = rand.Read(raw[:])
	c.apiKey = "hk_chaos_" + hex.EncodeToString(raw[:])

	db := "sqlite://" + filepath.Join(dir, "herald.db")
	if o.backend == BackendPostgres {
		c.pg, err = startPGSet(ctx, o.pgBin, o.replication, o.standbyLag, o.log)
		if err != nil {
			c.close()
			return nil, err
		}
		db = c.pg.URL()
	}
	common := []string{
		"--db", db, "--allow-private-networks",
		// Find retries within a fraction of the shortest retry delay.
		"--poll-interval", "100ms",
		"--shutdown-timeout", "5s",
		"--log-level", "warn",
	}
	if o.leaseMargin > 0 {
		common = append(common, "--lease-margin", o.leaseMargin.String())
	}
	if o.backend == BackendPostgres {
		// Every node shares one key ring; on SQLite the node makes its key
		// file beside the database, as by default.
		key, err := keyring.Generate("chaos")
		if err != nil {
			c.close()
			return nil, err
		}
		common = append(common, "--encryption-key", key)
	}
	port, err := heraldproc.FreePort()
	if err != nil {
		c.close()
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	c.api = "http://" + addr
	serve := append([]string{"serve", "--addr", addr, "--api-key", c.apiKey}, common...)
	c.nodes = append(c.nodes, newNode("serve", o.herald, serve, c.api+"/healthz", o.log))
	c.nodes[0].metrics = c.api + "/metrics"
	if o.backend == BackendPostgres {
		for i := 1; i <= 2; i++ {
			mport, err := heraldproc.FreePort()
			if err != nil {
				c.close()
				return nil, err
			}
			maddr := "127.0.0.1:" + strconv.Itoa(mport)
			worker := append([]string{"worker", "--metrics-addr", maddr}, common...)
			w := newNode("worker-"+strconv.Itoa(i), o.herald, worker, "http://"+maddr+"/metrics", o.log)
			w.metrics = w.ready
			c.nodes = append(c.nodes, w)
		}
	}
	// The serve node first: it migrates the database before the workers
	// look at it.
	for _, n := range c.nodes {
		if err := n.start(ctx); err != nil {
			c.close()
			return nil, err
		}
	}
	return c, nil
}

func (c *cluster) node(name string) *node {
	for _, n := range c.nodes {
		if n.name == name {
			return n
		}
	}
	panic("chaos: no node " + name)
}

func (c *cluster) nodeNames() []string {
	names := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		names[i] = n.name
	}
	return names
}

// watchMemory samples every node's peak memory until ctx ends.
func (c *cluster) watchMemory(ctx context.Context) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			for _, n := range c.nodes {
				n.sampleMemory()
			}
		}
	}
}

// revive makes sure every node runs and is not frozen, for the drain: a
// node that died on its own (already counted) is started again.
func (c *cluster) revive(ctx context.Context) error {
	for _, n := range c.nodes {
		n.thaw()
		if !n.alive() {
			if err := n.start(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// close stops the nodes, then the database, and removes what the run made.
func (c *cluster) close() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.stop()
		}()
	}
	wg.Wait()
	if c.pg != nil {
		c.pg.close()
	}
	if c.dir != "" {
		_ = os.RemoveAll(c.dir)
	}
}
