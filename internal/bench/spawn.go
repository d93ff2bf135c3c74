package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/heraldhooks/herald/internal/heraldproc"
	"github.com/heraldhooks/herald/internal/keyring"
)

const (
	// startTimeout bounds how long a spawned Herald may take to answer
	// /healthz (it migrates its database first).
	startTimeout = time.Minute
	// stopTimeout bounds how long a spawned Herald may take to stop after
	// SIGTERM before it is killed. Its deliveries have drained by then.
	stopTimeout = 40 * time.Second
	// childOutputTail is how much of the child's output is kept, to show
	// when it fails.
	childOutputTail = 16 << 10
)

// child is a `herald serve` the bench started.
type child struct {
	cmd    *exec.Cmd
	pid    string
	url    string
	apiKey string
	// db names the database kind ("sqlite" or "postgres") for the report.
	db string
	// dsn is its --db.
	dsn string
	// tmp is the directory of a database made for this run, removed at
	// the end; "" when the caller gave --db.
	tmp    string
	output *heraldproc.Tail
	exited chan struct{}
	err    error // how it exited, once exited is closed
}

// spawn starts `herald serve` from the binary bin on a free 127.0.0.1
// port, with a fresh API key, deliveries to loopback allowed, and db (a
// fresh SQLite file in a temporary directory when ""), then waits until it
// answers /healthz. extra are more serve flags. On PostgreSQL, which needs
// a key ring, it gives a throwaway one (its id names the run) unless extra
// has --encryption-key: a database holding secrets under another key then
// refuses to start, and says which key it lacks. The child gets this process's environment
// without its HERALD_* variables, so what it runs with is what the command
// line says.
func spawn(ctx context.Context, bin, db string, extra []string) (*child, error) {
	if bin == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find the herald binary: %w", err)
		}
		bin = self
	}
	c := &child{output: &heraldproc.Tail{Max: childOutputTail}, exited: make(chan struct{}), db: "sqlite"}
	if db == "" {
		dir, err := os.MkdirTemp("", "herald-bench-")
		if err != nil {
			return nil, fmt.Errorf("make a directory for the database: %w", err)
		}
		c.tmp = dir
		db = "sqlite://" + filepath.Join(dir, "herald.db")
	} else if strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://") {
		c.db = "postgres"
	}
	var raw [18]byte
	if _, err := rand.Read(raw[:]); err != nil {
		c.cleanup()
		return nil, fmt.Errorf("make an API key: %w", err)
	}
	c.apiKey = "hk_bench_" + hex.EncodeToString(raw[:])
	c.dsn = db
	args := []string{"--db", db, "--api-key", c.apiKey, "--allow-private-networks"}
	if c.db == "postgres" && !hasFlag(extra, "--encryption-key") {
		key, err := keyring.Generate("bench-" + strconv.FormatInt(time.Now().Unix(), 10))
		if err != nil {
			c.cleanup()
			return nil, err
		}
		args = append(args, "--encryption-key", key)
	}
	args = append(args, extra...)
	for try := 1; ; try++ {
		err := c.start(ctx, bin, args)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, errPortTaken) || try == spawnTries {
			c.cleanup()
			return nil, err
		}
		c.output.Reset()
		c.exited = make(chan struct{})
	}
}

// spawnTries is how many free ports spawn tries: another process may take
// the one found before the child listens on it (freeAddr).
const spawnTries = 3

// errPortTaken is a start whose port another process took first.
var errPortTaken = errors.New("the port was taken")

// start starts `bin serve` with args on a port pickAddr finds and waits
// until it is ready. A child that could not listen on its port is
// errPortTaken.
func (c *child) start(ctx context.Context, bin string, args []string) error {
	addr, err := pickAddr()
	if err != nil {
		return err
	}
	c.url = "http://" + addr
	c.cmd = exec.Command(bin, append([]string{"serve", "--addr", addr}, args...)...)
	c.cmd.Env = heraldproc.Env()
	c.cmd.Stdout = c.output
	c.cmd.Stderr = c.output
	c.cmd.SysProcAttr = childAttr()
	if err := c.cmd.Start(); err != nil {
		return fmt.Errorf("start %s serve: %w", bin, err)
	}
	c.pid = strconv.Itoa(c.cmd.Process.Pid)
	exited := c.exited
	go func() {
		c.err = c.cmd.Wait()
		close(exited)
	}()
	if err := c.waitReady(ctx); err != nil {
		c.halt()
		if strings.Contains(c.output.String(), "address already in use") {
			return fmt.Errorf("%w: %w", errPortTaken, err)
		}
		return err
	}
	return nil
}

// hasFlag says whether args give the flag name (--name v or --name=v).
func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

// pickAddr finds the port a child listens on: heraldproc.FreeAddr, or a
// test's.
var pickAddr = heraldproc.FreeAddr

// waitReady waits until the child answers /healthz (and isOurs), the
// child exits, or startTimeout passes.
func (c *child) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	err := heraldproc.WaitReady(ctx, c.url+"/healthz", c.exited, c.isOurs)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, heraldproc.ErrExited):
		return fmt.Errorf("the spawned herald serve exited before it was ready (%v); its output:\n%s", c.err, c.output.String())
	case ctx.Err() != nil:
		return fmt.Errorf("the spawned herald serve did not answer %s/healthz in time (%w); its output:\n%s", c.url, ctx.Err(), c.output.String())
	default:
		return fmt.Errorf("check the spawned herald: %w", err)
	}
}

// isOurs says whether what answers at the child's address takes the
// child's API key: another process that took the port first (a Herald
// of its own, say) answers /healthz too, and the child fails to listen.
func (c *child) isOurs(ctx context.Context, hc *http.Client) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url+"/v1/endpoints?limit=1", nil)
	if err != nil {
		return false
	}
	req.Header.Set("Authorization", "Bearer "+c.apiKey)
	res, err := hc.Do(req)
	if err != nil {
		return false
	}
	res.Body.Close()
	return res.StatusCode == http.StatusOK
}

// failed returns an error when the child exited on its own.
func (c *child) failed() error {
	select {
	case <-c.exited:
		return fmt.Errorf("the spawned herald serve exited during the run (%v); its output:\n%s", c.err, c.output.String())
	default:
		return nil
	}
}

// stop ends the child (SIGTERM, then SIGKILL after stopTimeout), waits for
// it, and removes the database made for it.
func (c *child) stop() error {
	err := c.halt()
	c.cleanup()
	return err
}

// halt ends the child (SIGTERM, then SIGKILL after stopTimeout) and waits
// for it.
func (c *child) halt() error {
	select {
	case <-c.exited:
		return nil
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
		if c.err != nil {
			return fmt.Errorf("the spawned herald serve stopped with %v; its output:\n%s", c.err, c.output.String())
		}
		return nil
	case <-time.After(stopTimeout):
		_ = c.cmd.Process.Kill()
		<-c.exited
		return fmt.Errorf("the spawned herald serve did not stop within %s of SIGTERM and was killed", stopTimeout)
	}
}

func (c *child) cleanup() {
	if c.tmp != "" {
		_ = os.RemoveAll(c.tmp)
	}
}
