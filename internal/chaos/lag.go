package chaos

import (
	"net"
	"time"
)

// lagRelay stands between a standby and its primary and holds what the
// primary sends for a while before passing it on, as a network between
// two zones does. When the primary's side ends (the primary died), what
// the relay still holds is dropped with the connection, as packets in
// flight are lost with a machine: so with an asynchronous standby, the
// primary's last moments of WAL never reach it.
type lagRelay struct {
	ln     net.Listener
	target string
	lag    time.Duration
}

// startLagRelay listens on a free loopback port in front of target.
func startLagRelay(target string, lag time.Duration) (*lagRelay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &lagRelay{ln: ln, target: target, lag: lag}
	go r.serve()
	return r, nil
}

func (r *lagRelay) port() int { return r.ln.Addr().(*net.TCPAddr).Port }

// serve relays each connection until the listener is closed; a
// connection ends when either side does.
func (r *lagRelay) serve() {
	for {
		down, err := r.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.DialTimeout("tcp", r.target, 5*time.Second)
		if err != nil {
			down.Close()
			continue
		}
		go r.late(up, down)
		go func() {
			// The standby's answers go straight back; one way's lag
			// is enough to hold WAL back.
			buf := make([]byte, 32<<10)
			for {
				n, err := down.Read(buf)
				if n > 0 {
					if _, werr := up.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			up.Close()
			down.Close()
		}()
	}
}

// late passes what arrives on up to down lag after it arrived, and drops
// what it holds when up ends.
type chunk struct {
	at   time.Time
	data []byte
}

func (r *lagRelay) late(up, down net.Conn) {
	queue := make(chan chunk, 4096)
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		buf := make([]byte, 32<<10)
		for {
			n, err := up.Read(buf)
			if n > 0 {
				select {
				case queue <- chunk{at: time.Now(), data: append([]byte(nil), buf[:n]...)}:
				default: // the relay is full: the link is saturated, drop the connection
					down.Close()
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	defer up.Close()
	defer down.Close()
	for {
		select {
		case <-gone:
			return // what is still queued is lost
		case c := <-queue:
			select {
			case <-gone:
				return
			case <-time.After(time.Until(c.at.Add(r.lag))):
			}
			if _, err := down.Write(c.data); err != nil {
				return
			}
		}
	}
}

// close stops listening; the connections end with the servers.
func (r *lagRelay) close() {
	r.ln.Close()
}
