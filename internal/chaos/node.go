package chaos

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// nodeStartTimeout bounds how long a node may take to be ready.
	nodeStartTimeout = time.Minute
	// nodeStopTimeout bounds a graceful stop at the end of a run.
	nodeStopTimeout = 30 * time.Second
	// nodeOutputTail is how much of a node's output is kept, to show when it
	// dies on its own.
	nodeOutputTail = 32 << 10
)

// node is one Herald process the harness runs, restarts after killing it,
// and watches: whether it exited without being killed, and its peak memory
// over all its lives.
type node struct {
	name string // serve, worker-1, ...
	bin  string
	args []string
	// ready is the URL that answers 200 once the node runs (/healthz of
	// the API, or /metrics of a worker).
	ready string
	log   func(format string, args ...any)

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	expect  bool // the harness is ending this life (kill or stop)
	stopped bool // SIGSTOPped, not yet continued
	peakRSS int64
	starts  int
	died    []string // how each unexpected exit looked
	output  *tail
}

// newNode describes a node; start runs it.
func newNode(name, bin string, args []string, ready string, logf func(string, ...any)) *node {
	return &node{name: name, bin: bin, args: args, ready: ready, log: logf, output: &tail{max: nodeOutputTail}}
}

// start runs the node and waits until it is ready.
func (n *node) start(ctx context.Context) error {
	n.mu.Lock()
	cmd := exec.Command(n.bin, n.args...)
	cmd.Env = withoutHeraldEnv(os.Environ())
	cmd.Stdout = n.output
	cmd.Stderr = n.output
	// Its own process group, killed by the kernel if the harness dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		n.mu.Unlock()
		return fmt.Errorf("start %s: %w", n.name, err)
	}
	exited := make(chan struct{})
	n.cmd, n.exited, n.expect, n.stopped = cmd, exited, false, false
	n.starts++
	n.mu.Unlock()
	go n.wait(cmd, exited)
	return n.waitReady(ctx, exited)
}

// wait reaps one life of the node and records it when nobody asked it to end.
func (n *node) wait(cmd *exec.Cmd, exited chan struct{}) {
	err := cmd.Wait()
	n.mu.Lock()
	if !n.expect {
		msg := fmt.Sprintf("%s (pid %d) exited by itself: %v; its last output:\n%s", n.name, cmd.Process.Pid, err, n.output.String())
		n.died = append(n.died, msg)
		n.log("%s", msg)
	}
	n.mu.Unlock()
	close(exited)
}

func (n *node) waitReady(ctx context.Context, exited chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, nodeStartTimeout)
	defer cancel()
	hc := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		if req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.ready, nil); err == nil {
			if res, err := hc.Do(req); err == nil {
				res.Body.Close()
				if res.StatusCode == http.StatusOK {
					return nil
				}
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited before it was ready; its output:\n%s", n.name, n.output.String())
		case <-ctx.Done():
			return fmt.Errorf("%s was not ready at %s in time; its output:\n%s", n.name, n.ready, n.output.String())
		case <-tick.C:
		}
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (n *node) kill() {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.expect = true
	n.mu.Unlock()
	n.sampleMemory()
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

// freeze sends SIGSTOP; thaw sends SIGCONT.
func (n *node) freeze() {
	n.sampleMemory()
	n.mu.Lock()
	defer n.mu.Unlock()
	_ = n.cmd.Process.Signal(syscall.SIGSTOP)
	n.stopped = true
}

func (n *node) thaw() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		_ = n.cmd.Process.Signal(syscall.SIGCONT)
		n.stopped = false
	}
}

// stop ends the node for good: SIGTERM (after SIGCONT), then SIGKILL past
// nodeStopTimeout. A node that does not stop in time counts as one that
// misbehaved.
func (n *node) stop() {
	n.thaw()
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.expect = true
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	n.sampleMemory()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(nodeStopTimeout):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		n.mu.Lock()
		n.died = append(n.died, fmt.Sprintf("%s did not stop within %s of SIGTERM and was killed", n.name, nodeStopTimeout))
		n.mu.Unlock()
	}
}

// alive reports whether the current life is running (or frozen).
func (n *node) alive() bool {
	n.mu.Lock()
	exited := n.exited
	n.mu.Unlock()
	select {
	case <-exited:
		return false
	default:
		return true
	}
}

// sampleMemory reads the peak resident memory of the current life
// (VmHWM) and keeps the largest seen over all lives.
func (n *node) sampleMemory() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	if rss, err := peakRSS(n.cmd.Process.Pid); err == nil && rss > n.peakRSS {
		n.peakRSS = rss
	}
}

// report is what the verdict shows of the node.
func (n *node) report() NodeReport {
	n.mu.Lock()
	defer n.mu.Unlock()
	return NodeReport{Name: n.name, Starts: n.starts, PeakRSSBytes: n.peakRSS, DiedOnItsOwn: len(n.died), Deaths: append([]string(nil), n.died...)}
}

// peakRSS is VmHWM of /proc/<pid>/status in bytes.
func peakRSS(pid int) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:")
		if !ok {
			continue
		}
		num, _, _ := strings.Cut(strings.TrimSpace(rest), " ")
		kb, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("read VmHWM %q: %w", rest, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

func withoutHeraldEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, "HERALD_") {
			out = append(out, kv)
		}
	}
	return out
}

// freePort finds a free loopback port. Another process could take it
// before it is used; the one using it then fails to start, and says so.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	return port, nil
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tail) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tail) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
