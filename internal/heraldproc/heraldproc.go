// Package heraldproc has what the bench (internal/bench) and the fault
// harness (internal/chaos) both need of the herald processes they start:
// the environment a child runs with, a free port for it, the tail of its
// output, waiting until it answers, and its peak memory. How each starts,
// stops and restarts its children stays with it.
package heraldproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Env is this process's environment without its HERALD_* variables, for a
// child whose settings are all on its command line: what it runs with is
// what the command line says.
func Env() []string {
	env := os.Environ()
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, "HERALD_") {
			out = append(out, kv)
		}
	}
	return out
}

// FreeAddr finds a free 127.0.0.1 port and returns its host:port. Another
// process could take it before the child listens; the child then fails to
// start, and says so.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	return addr, nil
}

// FreePort is FreeAddr's port.
func FreePort() (int, error) {
	addr, err := FreeAddr()
	if err != nil {
		return 0, err
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	return strconv.Atoi(port)
}

// Tail keeps the last Max bytes written to it: a child's output, to show
// when it fails. It is safe for the child's writes and a reader at once.
type Tail struct {
	Max int

	mu  sync.Mutex
	buf []byte
}

// Write appends p, dropping the oldest bytes past Max.
func (b *Tail) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.Max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

// Reset forgets what was written.
func (b *Tail) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = nil
}

// String is what is kept, or "(none)" when nothing was written, so that a
// message quoting it says so.
func (b *Tail) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.buf) == 0 {
		return "(none)"
	}
	return string(b.buf)
}

// ErrExited is WaitReady's answer when the child exited first.
var ErrExited = errors.New("exited before it was ready")

// WaitReady polls url until it answers 200 and, when ours is not nil, ours
// agrees (another process that took the child's port answers too), the
// child exits (exited is closed: ErrExited), or ctx ends (its error).
func WaitReady(ctx context.Context, url string, exited <-chan struct{}, ours func(ctx context.Context, hc *http.Client) bool) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if res, err := hc.Do(req); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK && (ours == nil || ours(ctx, hc)) {
				return nil
			}
		}
		select {
		case <-exited:
			return ErrExited
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// PeakRSS returns the most resident memory the process pid has held, in
// bytes: VmHWM in /proc/<pid>/status; pid "self" is this process. It fails
// where there is no /proc (not Linux).
func PeakRSS(pid string) (int64, error) {
	f, err := os.Open("/proc/" + pid + "/status")
	if err != nil {
		return 0, fmt.Errorf("read peak RSS: %w", err)
	}
	defer f.Close()
	return parsePeakRSS(f)
}

func parsePeakRSS(f io.Reader) (int64, error) {
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:")
		if !ok {
			continue
		}
		num, unit, _ := strings.Cut(strings.TrimSpace(rest), " ")
		kb, err := strconv.ParseInt(num, 10, 64)
		if err != nil || strings.TrimSpace(unit) != "kB" {
			return 0, fmt.Errorf("read peak RSS: cannot read VmHWM %q", strings.TrimSpace(rest))
		}
		return kb * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read peak RSS: %w", err)
	}
	return 0, fmt.Errorf("read peak RSS: no VmHWM line")
}
