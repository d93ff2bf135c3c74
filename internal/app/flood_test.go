package app

import (
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTricklingClientsDoNotStarveOthers: 500 connections that send their
// request headers a byte a second neither slow a normal client's
// /healthz nor stay open past the header timeout (2 s here; 10 s in
// production).
//
// The normal client dials a new connection for every request, so a
// server that served connections one at a time, or capped them and
// queued the rest, would keep it waiting for the tricklers' cut-off
// (seconds). Its bound is on the median of the requests made in 1.5 s (100 ms) and on
// the slowest (1 s, half the header timeout): a noisy machine delays a
// few requests, never most of them, and no request may wait for a
// trickler to be cut off.
func TestTricklingClientsDoNotStarveOthers(t *testing.T) {
	t.Parallel()
	const (
		conns         = 500
		headerTimeout = 2 * time.Second
		// grace is how much later than the header timeout a cut-off may
		// be seen: the server's timer, its goroutine's turn, the client's
		// read, all under the race detector on a busy machine.
		grace = 3 * time.Second
	)
	addr := serving(t, 0, headerTimeout)

	type cut struct {
		after time.Duration // from the dial to the close
		err   error
	}
	cuts := make(chan cut, conns)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(stop); wg.Wait() })
	request := "GET /healthz HTTP/1.1\r\nHost: herald\r\nX-Slow: " + strings.Repeat("a", 60) + "\r\n\r\n"
	for range conns {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		start := time.Now()
		wg.Add(2)
		closed := make(chan struct{})
		go func() { // the reader: waits for the server to close
			defer wg.Done()
			defer close(closed)
			defer conn.Close()
			_ = conn.SetReadDeadline(start.Add(headerTimeout + grace))
			_, err := io.Copy(io.Discard, conn)
			if err != nil && os.IsTimeout(err) {
				cuts <- cut{err: fmt.Errorf("still open %s after the dial", time.Since(start).Round(time.Millisecond))}
				return
			}
			cuts <- cut{after: time.Since(start)}
		}()
		go func() { // the writer: a byte a second, never the end of the headers
			defer wg.Done()
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for i := 0; i < len(request)-1; i++ {
				if _, err := conn.Write([]byte{request[i]}); err != nil {
					return
				}
				select {
				case <-tick.C:
				case <-closed:
					return
				case <-stop:
					return
				}
			}
		}()
	}

	// A normal client, a new connection per request, while they trickle.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	// Requests every 25 ms for 1.5 s, while every trickler is still
	// within its header timeout.
	var took []time.Duration
	pace := time.NewTicker(25 * time.Millisecond)
	defer pace.Stop()
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); <-pace.C {
		begin := time.Now()
		res, err := client.Get("http://" + addr + "/healthz")
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode)
		took = append(took, time.Since(begin))
	}
	slices.Sort(took)
	median, slowest := took[len(took)/2], took[len(took)-1]
	t.Logf("/healthz beside %d trickling connections: median %s, slowest %s", conns, median, slowest)
	require.Less(t, median, 100*time.Millisecond, "a normal client is served at once")
	require.Less(t, slowest, time.Second, "no request waits for a trickler to be cut off")
	require.GreaterOrEqual(t, len(took), 10)

	for range conns {
		c := <-cuts
		require.NoError(t, c.err, "every trickling connection is closed by the header timeout")
		require.Less(t, c.after, headerTimeout+grace)
	}
}

// TestLargeMultipartLeavesNoTemporaryFile: a 64 MB multipart POST to
// /ui/sign-in, sent whole over the network, answers 413 or 415, and no
// multipart-* file appears in the temporary directory at any moment of
// it. The body checks the directory as it is read by the transport: a
// server that parsed the form would have written most of the file part
// to a temporary file by then (and removed it only after answering).
//
// It sets TMPDIR, which the process shares, so it does not run in
// parallel.
func TestLargeMultipartLeavesNoTemporaryFile(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	require.Equal(t, tmp, os.TempDir())
	addr := serving(t, 0, 0)

	var head bytes.Buffer
	mw := multipart.NewWriter(&head)
	require.NoError(t, mw.WriteField("api_key", listenTestKey))
	_, err := mw.CreateFormFile("upload", "big.bin")
	require.NoError(t, err)
	tail := "\r\n--" + mw.Boundary() + "--\r\n"
	const size = 64 << 20
	body := &watchedBody{
		r:   io.MultiReader(&head, io.LimitReader(repeatReader('x'), size), strings.NewReader(tail)),
		dir: tmp,
	}
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/ui/sign-in", body)
	require.NoError(t, err)
	req.ContentLength = int64(head.Len() + size + len(tail))
	req.Header.Set("Content-Type", mw.FormDataContentType())
	res, err := (&http.Client{Timeout: time.Minute}).Do(req)
	body.mu.Lock()
	require.Empty(t, body.seen, "no temporary file while the body was sent")
	body.mu.Unlock()
	left, gerr := filepath.Glob(filepath.Join(tmp, "multipart-*"))
	require.NoError(t, gerr)
	require.Empty(t, left, "none afterwards")
	// An error is the server closing the connection on a body it would
	// not read before the client saw the answer: a refusal too.
	if err == nil {
		res.Body.Close()
		require.Contains(t, []int{http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType}, res.StatusCode)
		require.NotContains(t, res.Header.Get("Set-Cookie"), "herald_ui=")
	}
}

// watchedBody reads r and, every read, notes any multipart-* file in dir.
type watchedBody struct {
	r    io.Reader
	dir  string
	mu   sync.Mutex
	seen []string
}

func (b *watchedBody) Read(p []byte) (int, error) {
	if found, _ := filepath.Glob(filepath.Join(b.dir, "multipart-*")); len(found) > 0 {
		b.mu.Lock()
		for _, f := range found {
			if !slices.Contains(b.seen, f) {
				b.seen = append(b.seen, f)
			}
		}
		b.mu.Unlock()
	}
	return b.r.Read(p)
}

// repeatReader is an endless reader of one byte.
type repeatReader byte

func (c repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(c)
	}
	return len(p), nil
}
