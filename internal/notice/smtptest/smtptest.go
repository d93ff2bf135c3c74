// Package smtptest runs an SMTP server for tests (emersion/go-smtp) on a
// loopback port, and keeps every message it accepts.
package smtptest

import (
	"errors"
	"io"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
)

// Mail is one message the server accepted.
type Mail struct {
	From    string
	To      []string
	Subject string
	// Body is the message's body, decoded from quoted-printable.
	Body string
	Raw  string
}

// Server is a running test SMTP server.
type Server struct {
	// Addr is host:port; URL is an --smtp-url for it.
	Addr string
	URL  string

	mu     sync.Mutex
	mails  []Mail
	fail   int // refuse the next fail messages
	hold   chan struct{}
	signal chan struct{}
}

// Start runs a server until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: ln.Addr().String(), signal: make(chan struct{}, 1)}
	s.URL = "smtp://" + s.Addr + "?from=herald@example.com"
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &session{s: s}, nil }))
	srv.Domain = "localhost"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

// FailNext makes the server refuse the next n messages (a 451 at DATA).
func (s *Server) FailNext(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = n
}

// Hold makes the server keep every message waiting at DATA, unanswered,
// until release is called (as a slow or stuck mail server does); release
// is called when the test ends anyway.
func (s *Server) Hold(t testing.TB) (release func()) {
	s.mu.Lock()
	ch := make(chan struct{})
	s.hold = ch
	s.mu.Unlock()
	var once sync.Once
	release = func() {
		once.Do(func() {
			s.mu.Lock()
			if s.hold == ch {
				s.hold = nil
			}
			s.mu.Unlock()
			close(ch)
		})
	}
	t.Cleanup(release)
	return release
}

// Mails returns what the server accepted so far.
func (s *Server) Mails() []Mail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Mail(nil), s.mails...)
}

// Wait waits until the server holds at least n mails, and returns them;
// it fails the test after timeout.
func (s *Server) Wait(t testing.TB, n int, timeout time.Duration) []Mail {
	t.Helper()
	deadline := time.After(timeout)
	for {
		if m := s.Mails(); len(m) >= n {
			return m
		}
		select {
		case <-s.signal:
		case <-deadline:
			t.Fatalf("smtptest: %d mails after %s, want %d", len(s.Mails()), timeout, n)
		}
	}
}

type session struct {
	s    *Server
	from string
	to   []string
}

func (x *session) Reset()        { x.from, x.to = "", nil }
func (x *session) Logout() error { return nil }
func (x *session) Mail(from string, _ *smtp.MailOptions) error {
	x.from = from
	return nil
}
func (x *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	x.to = append(x.to, to)
	return nil
}

func (x *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s := x.s
	s.mu.Lock()
	if hold := s.hold; hold != nil {
		s.mu.Unlock()
		<-hold
		s.mu.Lock()
	}
	if s.fail > 0 {
		s.fail--
		s.mu.Unlock()
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again later"}
	}
	s.mu.Unlock()
	m := Mail{From: x.from, To: append([]string(nil), x.to...), Raw: string(raw)}
	msg, err := mail.ReadMessage(strings.NewReader(string(raw)))
	if err != nil {
		return errors.New("unreadable message")
	}
	dec := new(mime.WordDecoder)
	m.Subject, _ = dec.DecodeHeader(msg.Header.Get("Subject"))
	body, _ := io.ReadAll(msg.Body)
	if strings.EqualFold(msg.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
		body, _ = io.ReadAll(quotedprintable.NewReader(strings.NewReader(string(body))))
	}
	m.Body = strings.ReplaceAll(string(body), "\r\n", "\n")
	s.mu.Lock()
	s.mails = append(s.mails, m)
	s.mu.Unlock()
	select {
	case s.signal <- struct{}{}:
	default:
	}
	return nil
}
