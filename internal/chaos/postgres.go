package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/heraldhooks/herald/internal/heraldproc"
)

// pgCluster is a PostgreSQL cluster of the harness's own: initdb'd in a
// temporary directory and served on a free loopback port, so that the
// harness can crash it (pg_ctl stop -m immediate) and start it again
// without touching any other cluster on the machine, the system one
// included.
type pgCluster struct {
	bin  string // the directory holding initdb, pg_ctl and postgres
	dir  string // the temporary directory: data/, the socket, the log
	port int
	// cred runs the server binaries as another user: PostgreSQL refuses
	// to run as root, so as root the harness runs them as "postgres".
	cred *syscall.Credential
	log  func(format string, args ...any)
}

// pgBinaries are what the harness needs of a PostgreSQL installation.
var pgBinaries = []string{"initdb", "pg_ctl", "postgres"}

// findPGBin finds the directory of the PostgreSQL server binaries: dir when
// given, else the newest /usr/lib/postgresql/<version>/bin (Debian and
// Ubuntu), else the directory of initdb on the PATH. The error says what is
// missing and how to get it.
func findPGBin(dir string) (string, error) {
	var candidates []string
	if dir != "" {
		candidates = []string{dir}
	} else {
		found, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
		sort.Slice(found, func(i, j int) bool { return pgVersion(found[i]) > pgVersion(found[j]) })
		candidates = append(candidates, found...)
		if p, err := exec.LookPath("initdb"); err == nil {
			candidates = append(candidates, filepath.Dir(p))
		}
	}
	for _, c := range candidates {
		if missing := missingIn(c); len(missing) == 0 {
			return c, nil
		} else if dir != "" {
			return "", fmt.Errorf("the PostgreSQL binaries %s are not in %s; give the directory that holds them (--pg-bin)", strings.Join(missing, ", "), dir)
		}
	}
	return "", errors.New("the PostgreSQL server binaries (initdb, pg_ctl, postgres) were not found in /usr/lib/postgresql/*/bin nor on the PATH; " +
		"install the PostgreSQL server (Debian: apt-get install postgresql) or give their directory with --pg-bin")
}

func pgVersion(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func missingIn(dir string) []string {
	var missing []string
	for _, b := range pgBinaries {
		if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	return missing
}

// startPG makes and starts a cluster in a new temporary directory.
func startPG(ctx context.Context, binDir string, logf func(string, ...any)) (*pgCluster, error) {
	bin, err := findPGBin(binDir)
	if err != nil {
		return nil, err
	}
	c, err := newPGServer(bin, logf)
	if err != nil {
		return nil, err
	}
	// --no-sync: the cluster is thrown away; nothing of initdb's needs
	// to survive a machine crash.
	if out, err := c.run(ctx, "initdb", "-D", c.data(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"); err != nil {
		_ = os.RemoveAll(c.dir)
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	if err := c.start(ctx); err != nil {
		_ = os.RemoveAll(c.dir)
		return nil, err
	}
	return c, nil
}

// newPGServer makes the temporary directory of a server (given to the
// postgres user when the harness runs as root) and picks its port; its
// data directory is still to be made (initdb, or pg_basebackup for a
// standby).
func newPGServer(bin string, logf func(string, ...any)) (*pgCluster, error) {
	dir, err := os.MkdirTemp("", "herald-chaos-pg-")
	if err != nil {
		return nil, fmt.Errorf("make a directory for PostgreSQL: %w", err)
	}
	c := &pgCluster{bin: bin, dir: dir, log: logf}
	if os.Geteuid() == 0 {
		cred, err := postgresUser()
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		c.cred = cred
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("give %s to the postgres user: %w", dir, err)
		}
	}
	port, err := heraldproc.FreePort()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	c.port = port
	return c, nil
}

// postgresUser is the credential of the "postgres" user, for running the
// server binaries as root.
func postgresUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, errors.New("PostgreSQL refuses to run as root, and there is no \"postgres\" user to run it as; run the harness as another user or create that user")
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("read the postgres user's ids %q/%q", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func (c *pgCluster) data() string { return filepath.Join(c.dir, "data") }

// URL is the database URL Herald's nodes use.
func (c *pgCluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// start starts the server and waits until it accepts connections. fsync
// is off: the harness crashes PostgreSQL's processes, never the machine,
// and the operating system keeps what they wrote, so a crash still tests
// recovery; it spares the shared disk. Autovacuum runs as in production.
// A standby asks its primary again 200 ms after losing it (not 5 s), so a
// primary that crashed and restarted has its synchronous standby back at
// once.
func (c *pgCluster) start(ctx context.Context) error {
	opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -k %s -c fsync=off -c max_connections=200 -c autovacuum=on -c wal_retrieve_retry_interval=200ms", c.port, c.dir)
	out, err := c.run(ctx, "pg_ctl", "-D", c.data(), "-l", filepath.Join(c.dir, "postgres.log"), "-w", "-t", "60", "-o", opts, "start")
	if err != nil {
		return fmt.Errorf("start PostgreSQL: %w\n%s\n%s", err, out, c.logTail())
	}
	return nil
}

// crash stops the server in immediate mode: every process ends at once,
// without a checkpoint, as if it had crashed; the next start recovers
// from the WAL.
func (c *pgCluster) crash(ctx context.Context) error {
	if out, err := c.run(ctx, "pg_ctl", "-D", c.data(), "-m", "immediate", "-w", "-t", "60", "stop"); err != nil {
		return fmt.Errorf("crash PostgreSQL: %w\n%s", err, out)
	}
	return nil
}

// close stops the server and removes its directory.
func (c *pgCluster) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.run(ctx, "pg_ctl", "-D", c.data(), "-m", "fast", "-w", "-t", "20", "stop"); err != nil {
		_, _ = c.run(ctx, "pg_ctl", "-D", c.data(), "-m", "immediate", "-w", "stop")
	}
	_ = os.RemoveAll(c.dir)
}

func (c *pgCluster) run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Dir = c.dir
	// pg_ctl's server must not get the harness's signals, nor die with it
	// before close stops it in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: c.cred}
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	return out.String(), err
}

// logTail is the end of the server's log, for errors.
func (c *pgCluster) logTail() string {
	raw, err := os.ReadFile(filepath.Join(c.dir, "postgres.log"))
	if err != nil {
		return ""
	}
	if len(raw) > 4096 {
		raw = raw[len(raw)-4096:]
	}
	return string(raw)
}
