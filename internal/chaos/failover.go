package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The replication of the PostgreSQL backend, Config.Replication.
const (
	// ReplicationSync runs a primary and a synchronous standby: a commit
	// returns once the standby has it, so an acknowledged event survives
	// the primary's death.
	ReplicationSync = "sync"
	// ReplicationAsync runs a primary and an asynchronous standby: the
	// events of the primary's last moments may not have reached the
	// standby when it dies.
	ReplicationAsync = "async"
	// ReplicationNone runs one server, which the harness only crashes and
	// starts again.
	ReplicationNone = "none"
)

// recoveryLimit is how soon after a promotion every node must be back at
// work: an ingest or a delivery committed on the new primary.
const recoveryLimit = 15 * time.Second

// pgSet is the PostgreSQL of a run: one server, or a primary and a
// streaming standby that the failover nemesis promotes. The nodes get every
// server's address in one URL with target_session_attrs=read-write, so
// that they find the primary by themselves, as they would under Patroni
// or a cloud's managed PostgreSQL.
type pgSet struct {
	replication string
	// lag, when set, puts a lagRelay between the standby and its primary.
	lag   time.Duration
	relay *lagRelay
	log   func(string, ...any)

	mu      sync.Mutex
	servers []*pgCluster
	primary int // index in servers
}

// startPGSet starts the primary and, unless replication is
// ReplicationNone, a standby made from it with pg_basebackup, and waits
// until the standby streams (synchronously with ReplicationSync).
func startPGSet(ctx context.Context, binDir, replication string, lag time.Duration, logf func(string, ...any)) (*pgSet, error) {
	primary, err := startPG(ctx, binDir, logf)
	if err != nil {
		return nil, err
	}
	s := &pgSet{replication: replication, lag: lag, log: logf, servers: []*pgCluster{primary}}
	if replication == ReplicationNone {
		return s, nil
	}
	if !executable(filepath.Join(primary.bin, "pg_basebackup")) {
		s.close()
		return nil, fmt.Errorf("pg_basebackup is not in %s: the standby cannot be made (run with replication %s for one server)", primary.bin, ReplicationNone)
	}
	standby, err := newPGServer(primary.bin, logf)
	if err != nil {
		s.close()
		return nil, err
	}
	s.servers = append(s.servers, standby)
	if err := s.makeStandby(ctx, 1); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// URL is the database URL the nodes use: every server, the primary wanted.
func (s *pgSet) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.servers) == 1 {
		return s.servers[0].URL()
	}
	hosts := make([]string, len(s.servers))
	for i, c := range s.servers {
		hosts[i] = fmt.Sprintf("127.0.0.1:%d", c.port)
	}
	return "postgres://postgres@" + strings.Join(hosts, ",") + "/postgres?sslmode=disable&target_session_attrs=read-write"
}

func (s *pgSet) current() *pgCluster {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.servers[s.primary]
}

// crash stops the primary in immediate mode; start starts it again (its
// standby, if any, streams again by itself).
func (s *pgSet) crash(ctx context.Context) error { return s.current().crash(ctx) }
func (s *pgSet) start(ctx context.Context) error { return s.current().start(ctx) }

// failover kills the primary (immediate stop: no checkpoint, no goodbye to
// the standby) and promotes the standby, the way a failover manager does.
// With ReplicationSync, the new primary then runs without a synchronous
// standby until rebuild gives it one, as Patroni does when the only one is
// gone: else every commit would wait for a standby that is not there. It
// returns when the standby was promoted. between runs once the primary
// is dead and before the standby is promoted.
func (s *pgSet) failover(ctx context.Context, between func()) (time.Time, error) {
	s.mu.Lock()
	if len(s.servers) < 2 {
		s.mu.Unlock()
		return time.Time{}, errors.New("no standby to promote (replication none)")
	}
	old := s.servers[s.primary]
	next := 1 - s.primary
	standby := s.servers[next]
	s.mu.Unlock()
	killAt := time.Now()
	if err := old.crash(ctx); err != nil {
		return time.Time{}, err
	}
	killed := time.Since(killAt)
	if between != nil {
		between()
	}
	if out, err := standby.run(ctx, "pg_ctl", "-D", standby.data(), "-w", "-t", "60", "promote"); err != nil {
		return time.Time{}, fmt.Errorf("promote the standby: %w\n%s\n%s", err, out, standby.logTail())
	}
	promoted := time.Now()
	s.mu.Lock()
	s.primary = next
	s.mu.Unlock()
	if s.replication == ReplicationSync {
		if err := standby.exec(ctx, "ALTER SYSTEM SET synchronous_standby_names = ''", "SELECT pg_reload_conf()"); err != nil {
			return promoted, err
		}
	}
	s.log("failover: primary on port %d killed (%s), standby on port %d promoted", old.port, killed.Round(time.Millisecond), standby.port)
	return promoted, nil
}

// rebuild makes the server that is not the primary a new standby of it,
// from a fresh base backup, and waits until it streams; with
// ReplicationSync the primary then waits for it on every commit again.
func (s *pgSet) rebuild(ctx context.Context) error {
	s.mu.Lock()
	i := 1 - s.primary
	s.mu.Unlock()
	return s.makeStandby(ctx, i)
}

// makeStandby makes server i a standby of the primary: base backup with
// -R (standby.signal and primary_conninfo), start, wait for it to stream,
// and with ReplicationSync name it the synchronous standby.
func (s *pgSet) makeStandby(ctx context.Context, i int) error {
	s.mu.Lock()
	primary, standby := s.servers[s.primary], s.servers[i]
	s.mu.Unlock()
	_, _ = standby.run(ctx, "pg_ctl", "-D", standby.data(), "-m", "immediate", "-w", "stop")
	if err := os.RemoveAll(standby.data()); err != nil {
		return fmt.Errorf("remove the old standby's data: %w", err)
	}
	port := primary.port
	if s.lag > 0 {
		if s.relay != nil {
			s.relay.close()
		}
		relay, err := startLagRelay(fmt.Sprintf("127.0.0.1:%d", primary.port), s.lag)
		if err != nil {
			return fmt.Errorf("start the standby's lag relay: %w", err)
		}
		s.relay, port = relay, relay.port()
	}
	conninfo := fmt.Sprintf("host=127.0.0.1 port=%d user=postgres application_name=standby", port)
	if out, err := standby.run(ctx, "pg_basebackup", "-d", conninfo, "-D", standby.data(), "-R", "-X", "stream", "--no-sync", "-c", "fast"); err != nil {
		return fmt.Errorf("pg_basebackup: %w\n%s", err, out)
	}
	if err := standby.start(ctx); err != nil {
		return err
	}
	want := "async"
	if s.replication == ReplicationSync {
		if err := primary.exec(ctx, "ALTER SYSTEM SET synchronous_standby_names = '*'", "SELECT pg_reload_conf()"); err != nil {
			return err
		}
		want = "sync"
	}
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := primary.psql(ctx, "SELECT state || ' ' || sync_state FROM pg_stat_replication WHERE application_name = 'standby'")
		if err == nil && out == "streaming "+want {
			s.log("standby on port %d streams from port %d (%s)", standby.port, primary.port, want)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the standby on port %d did not stream (%s) within a minute: %v (state %q)\n%s", standby.port, want, err, out, standby.logTail())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *pgSet) close() {
	if s.relay != nil {
		defer s.relay.close()
	}
	var wg sync.WaitGroup
	for _, c := range s.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.close()
		}()
	}
	wg.Wait()
}

// exec runs statements on the server with psql, one by one (ALTER SYSTEM
// runs outside a transaction block).
func (c *pgCluster) exec(ctx context.Context, stmts ...string) error {
	_, err := c.psql(ctx, stmts...)
	return err
}

// psql runs statements on the server and returns what they print,
// unaligned, without headers.
func (c *pgCluster) psql(ctx context.Context, stmts ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	args := []string{"-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", strconv.Itoa(c.port), "-U", "postgres", "-d", "postgres"}
	for _, q := range stmts {
		args = append(args, "-c", q)
	}
	out, err := c.run(ctx, "psql", args...)
	if err != nil {
		return "", fmt.Errorf("psql on port %d: %w\n%s", c.port, err, out)
	}
	return strings.TrimSpace(out), nil
}

// FailoverReport is one failover as the nodes lived it: when the standby
// was promoted, and how many seconds after it each node first committed
// work on the new primary (an ingest or a delivery's outcome).
type FailoverReport struct {
	Promoted  time.Time          `json:"promoted"`
	Recovered map[string]float64 `json:"recovered_seconds"`
	// NotRecovered names the nodes that did no work within recoveryLimit
	// and some more.
	NotRecovered []string `json:"not_recovered,omitempty"`
	// Interrupted names the nodes killed or frozen by another fault before
	// they were back: not judged.
	Interrupted []string `json:"interrupted,omitempty"`
}

// backToWork waits until the node has committed work after since (a
// promotion, just past): its count of ingested events plus delivered
// deliveries (its /metrics) grows past base, read once the primary was
// dead and before the promotion (a count grows only by a commit, which
// neither the dead primary nor the standby not yet promoted can make); a
// negative base is taken from the first look instead. It returns how long after since that was
// seen and recovered; or interrupted, when another fault killed or froze
// the node first (its time says nothing of the failover); or neither,
// when it did no work within limit of since.
func backToWork(ctx context.Context, n *node, since time.Time, base float64, limit time.Duration) (took time.Duration, recovered, interrupted bool) {
	start := since
	life := n.life()
	hc := &http.Client{Timeout: time.Second}
	for time.Since(start) < limit {
		if n.life() != life || n.frozen() {
			return 0, false, true
		}
		if v, err := workDone(ctx, hc, n.metrics); err == nil {
			if base < 0 {
				base = v
			} else if v > base {
				return time.Since(start), true, false
			}
		}
		select {
		case <-ctx.Done():
			return 0, false, false
		case <-time.After(100 * time.Millisecond):
		}
	}
	return 0, false, false
}

// workDone reads a node's /metrics and returns its events ingested plus
// its deliveries delivered.
func workDone(ctx context.Context, hc *http.Client, url string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	res, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", url, res.Status)
	}
	var sum float64
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "herald_events_ingested_total ") &&
			!strings.HasPrefix(line, `herald_deliveries_total{outcome="delivered"} `) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("read %q: %w", line, err)
		}
		sum += v
	}
	return sum, sc.Err()
}
