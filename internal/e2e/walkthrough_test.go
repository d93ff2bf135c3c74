package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/syncbuf"
)

// TestReadmeWalkthrough runs the README's five-minute walk-through, the
// shell block between <!-- walkthrough --> and <!-- /walkthrough -->, as a
// user pasting it would, against a freshly built binary. Only the two ports
// change (so tests can run side by side), through the environment twins and
// the receiver's address.
func TestReadmeWalkthrough(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	script := walkthrough(t, string(readme))

	passWalkthrough(t, heraldBinary(t), script)
}

// passWalkthrough runs the walk-through's script with the herald binary
// bin and checks that it shows what the README tells a reader to expect.
func passWalkthrough(t *testing.T, bin, script string) {
	t.Helper()
	// The script must know its addresses before it starts, so they are
	// picked free, and another process may take one first: then serve or
	// the receiver cannot listen, and the walk-through runs again on
	// other ports.
	var text string
	for try := 1; ; try++ {
		var err error
		text, err = runWalkthrough(t, bin, script)
		if err == nil {
			break
		}
		if try < 3 && strings.Contains(text, "address already in use") {
			t.Logf("a port was taken (try %d); again on others:\n%s", try, text)
			continue
		}
		require.NoError(t, err, "the walk-through failed:\n%s", text)
	}

	// What a reader is told to expect.
	require.Regexp(t, `order\.created\s+evt_\S+\s+valid`, text, "the first event arrives, verified")
	require.Regexp(t, `order\.paid\s+evt_\S+\s+valid`, text, "the failing receiver still sees signed attempts")
	require.GreaterOrEqual(t, len(regexp.MustCompile(`order\.paid\s+evt_\S+\s+valid`).FindAllString(text, -1)), 4,
		"three attempts, then the replay")
	require.Contains(t, text, "500", "the attempts show the receiver's 500")
	require.Regexp(t, `(?m)^status:\s+delivered`, text, "the replayed delivery ends delivered")
}

// runWalkthrough runs the walk-through's script with the herald binary
// bin, the API and the receiver on addresses free a moment before, and
// returns its output. It runs ./herald in a fresh directory, as a reader
// who built it there would.
func runWalkthrough(t *testing.T, bin, script string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Symlink(bin, filepath.Join(dir, "herald")))
	apiAddr, rcvAddr := freeAddr(t), freeAddr(t)
	script = strings.ReplaceAll(script, "127.0.0.1:4000", rcvAddr)
	preamble := "set -euo pipefail\n" +
		"export HERALD_ADDR=" + apiAddr + " HERALD_SERVER=http://" + apiAddr + "\n" +
		"trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n"

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", preamble+script)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A port taken ends the run at once: the script would otherwise wait
	// for a server that never started until the timeout.
	out := &portWatch{taken: cancel}
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Run()
	return out.String(), err
}

// portWatch is a script's output, which calls taken once it says that an
// address was in use.
type portWatch struct {
	syncbuf.Buffer
	taken func()
}

func (w *portWatch) Write(p []byte) (int, error) {
	n, err := w.Buffer.Write(p)
	if strings.Contains(w.String(), "address already in use") {
		w.taken()
	}
	return n, err
}

// walkthrough returns the shell code of the README's walk-through block.
func walkthrough(t *testing.T, readme string) string {
	t.Helper()
	start := strings.Index(readme, "<!-- walkthrough -->")
	end := strings.Index(readme, "<!-- /walkthrough -->")
	require.True(t, start >= 0 && end > start, "README has no walk-through block")
	block := readme[start:end]
	open := strings.Index(block, "```sh\n")
	closing := strings.LastIndex(block, "```")
	require.True(t, open >= 0 && closing > open, "the walk-through block holds no sh code")
	return block[open+len("```sh\n") : closing]
}
