package chaos

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/heraldhooks/herald/internal/heraldproc"
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
	// metrics is the URL of its /metrics, where the failover nemesis
	// watches its ingests and deliveries.
	metrics string
	log     func(format string, args ...any)

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	expect  bool // the harness is ending this life (kill or stop)
	stopped bool // SIGSTOPped, not yet continued
	peakRSS int64
	starts  int
	died    []string // how each unexpected exit looked
	output  *heraldproc.Tail
}

// newNode describes a node; start runs it.
func newNode(name, bin string, args []string, ready string, logf func(string, ...any)) *node {
	return &node{name: name, bin: bin, args: args, ready: ready, log: logf, output: &heraldproc.Tail{Max: nodeOutputTail}}
}

// start runs the node and waits until it is ready.
func (n *node) start(ctx context.Context) error {
	n.mu.Lock()
	cmd := exec.Command(n.bin, n.args...)
	cmd.Env = heraldproc.Env()
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

// waitReady waits until the node answers at its ready URL, exits, or
// nodeStartTimeout passes.
func (n *node) waitReady(ctx context.Context, exited chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, nodeStartTimeout)
	defer cancel()
	err := heraldproc.WaitReady(ctx, n.ready, exited, nil)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, heraldproc.ErrExited):
		return fmt.Errorf("%s exited before it was ready; its output:\n%s", n.name, n.output.String())
	case ctx.Err() != nil:
		return fmt.Errorf("%s was not ready at %s in time; its output:\n%s", n.name, n.ready, n.output.String())
	default:
		return fmt.Errorf("%s: %w", n.name, err)
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

// life is the number of the node's current life (its starts so far).
func (n *node) life() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.starts
}

// frozen reports whether the node is SIGSTOPped, or killed and not yet
// started again.
func (n *node) frozen() bool {
	n.mu.Lock()
	stopped, expect := n.stopped, n.expect
	n.mu.Unlock()
	return stopped || expect
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
	if rss, err := heraldproc.PeakRSS(strconv.Itoa(n.cmd.Process.Pid)); err == nil && rss > n.peakRSS {
		n.peakRSS = rss
	}
}

// report is what the verdict shows of the node.
func (n *node) report() NodeReport {
	n.mu.Lock()
	defer n.mu.Unlock()
	return NodeReport{Name: n.name, Starts: n.starts, PeakRSSBytes: n.peakRSS, DiedOnItsOwn: len(n.died), Deaths: append([]string(nil), n.died...)}
}
