package chaos_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/chaos"
)

// heraldBin is the herald binary built from the tree for the nodes.
var heraldBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "herald-chaos-bin-")
	if err != nil {
		panic(err)
	}
	heraldBin = filepath.Join(dir, "herald")
	if out, err := exec.Command("go", "build", "-o", heraldBin, "github.com/heraldhooks/herald/cmd/herald").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		panic("build herald: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestShortRun is the harness's short run, part of make test: both
// backends at once, 40 s of load meeting every kind of fault (on
// PostgreSQL, a failover to its synchronous standby among them), and a
// verdict that must pass.
// HERALD_CHAOS_SEED repeats a run whose seed a failure printed.
func TestShortRun(t *testing.T) {
	t.Parallel()
	var seed uint64
	if s := os.Getenv("HERALD_CHAOS_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "HERALD_CHAOS_SEED")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var log bytes.Buffer
	vs, err := chaos.RunAll(ctx, chaos.Config{
		Herald:   heraldBin,
		Duration: 40 * time.Second,
		Rate:     20,
		Seed:     seed,
		// A drain usually takes a few seconds. When a breaker opened (a
		// frozen node wakes with several attempts to the hostile endpoint
		// in flight: they all time out at once), the drain waits past this
		// limit for its probe, five minutes after it opened.
		Drain: 2 * time.Minute,
		Log:   &log,
	}, []string{chaos.BackendSQLite, chaos.BackendPostgres})
	var table bytes.Buffer
	if len(vs) > 0 {
		require.NoError(t, chaos.WriteTable(&table, vs))
	}
	t.Logf("progress:\n%s\nverdict:\n%s", log.String(), table.String())
	require.NoError(t, err)
	require.Len(t, vs, 2)
	for _, v := range vs {
		require.True(t, v.Pass, "%s: %s (repeat with HERALD_CHAOS_SEED=%d)", v.Backend, v.Summary(), v.Seed)
		require.NotZero(t, len(v.Faults), "%s: faults were made", v.Backend)
		if v.Backend == chaos.BackendPostgres {
			require.Equal(t, chaos.ReplicationSync, v.Replication)
			require.NotEmpty(t, v.Failovers, "the standby was promoted")
		}
	}
}

// TestRollingUpgrade runs the previous release (the commit in
// release/previous) and the current one on one PostgreSQL database under
// load: nodes of the previous release, then the current release's
// `herald migrate` under them, then each node replaced by a current one.
// Nothing acknowledged may be lost, and every duplicate must come from a
// node replaced mid-attempt.
func TestRollingUpgrade(t *testing.T) {
	t.Parallel()
	old := buildPrevious(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var log bytes.Buffer
	v, err := chaos.Upgrade(ctx, chaos.UpgradeConfig{Old: old, New: heraldBin, Phase: 3 * time.Second, Rate: 20, Log: &log})
	var table bytes.Buffer
	if v != nil {
		require.NoError(t, chaos.WriteTable(&table, []*chaos.Verdict{v}))
	}
	t.Logf("progress:\n%s\nverdict:\n%s", log.String(), table.String())
	require.NoError(t, err)
	require.True(t, v.Pass, v.Summary())
	require.Zero(t, v.Lost)
	require.Zero(t, v.DuplicatesUntraced, "duplicates not from a replaced node")
	require.Len(t, v.Faults, 2, "both nodes were replaced")
	require.NotNil(t, v.Upgrade)
	require.Len(t, v.Upgrade.WorkOnNewerSchema, 2, "the previous serve and worker both ran on the migrated schema")
}

// buildPrevious builds the herald of the commit named in release/previous,
// from `git archive` into a temporary directory, with -trimpath so that
// the Go build cache serves a repeated build.
func buildPrevious(t *testing.T) string {
	t.Helper()
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	require.NoError(t, err, "the upgrade test needs the git history of the tree")
	root := strings.TrimSpace(string(top))
	raw, err := os.ReadFile(filepath.Join(root, "release", "previous"))
	require.NoError(t, err)
	commit := strings.TrimSpace(string(raw))
	src := t.TempDir()
	archive := exec.Command("git", "-C", root, "archive", "--format=tar", commit)
	untar := exec.Command("tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	require.NoError(t, err)
	untar.Stdin = pipe
	var archiveErr, untarErr bytes.Buffer
	archive.Stderr, untar.Stderr = &archiveErr, &untarErr
	require.NoError(t, untar.Start())
	require.NoError(t, archive.Run(), "git archive %s: %s", commit, archiveErr.String())
	require.NoError(t, untar.Wait(), "untar %s: %s", commit, untarErr.String())
	bin := filepath.Join(t.TempDir(), "herald-previous")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/herald")
	build.Dir = src
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build %s: %s", commit, out)
	return bin
}
