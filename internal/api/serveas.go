package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/heraldhooks/herald/internal/auth"
)

// ServeAs serves r as the principal p, skipping the bearer key: the seam
// through which Herald's own pages (/ui/, /portal/) act. A page that
// signs a person in (with a session cookie, its own proof) builds the
// same /v1 request a script would make and hands it here, so every
// action on a page is an API call, passes the same scope rule and
// answers the same errors. r's Authorization header is ignored.
func (s *Server) ServeAs(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	r = r.WithContext(auth.WithPrincipal(r.Context(), p))
	if _, pattern := s.mux.Handler(r); pattern == "" {
		s.noRoute(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Authenticate returns the principal key names, as a bearer key on a /v1
// call would (auth.ErrInvalidKey for a key that is not valid or was
// revoked). Pages use it to sign a person in with a key.
func (s *Server) Authenticate(ctx context.Context, key string) (auth.Principal, error) {
	return s.auth.Authenticate(ctx, key)
}

// AuthenticateHash is Authenticate for the key whose SHA-256 is sum.
func (s *Server) AuthenticateHash(ctx context.Context, sum [32]byte) (auth.Principal, error) {
	return s.auth.AuthenticateHash(ctx, sum)
}

// CallError is a /v1 call's error answer, as Call returns it.
type CallError struct {
	Status  int
	Code    string
	Message string
}

func (e *CallError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// Call makes the /v1 call method path (with its query) as p, in process:
// body, when not nil, is sent as JSON, and a 2xx answer's JSON is decoded
// into out when out is not nil. An error answer comes back as *CallError
// with the status, code and message a script would read.
func (s *Server) Call(ctx context.Context, p auth.Principal, method, path string, body, out any) error {
	var rd io.Reader = http.NoBody
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("call %s %s: encode body: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	r, err := http.NewRequestWithContext(ctx, method, path, rd)
	if err != nil {
		return fmt.Errorf("call %s %s: %w", method, path, err)
	}
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	s.ServeAs(rec, r, p)
	if rec.Code < 200 || rec.Code > 299 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Code == "" {
			return &CallError{Status: rec.Code, Code: "unexpected_answer", Message: strings.TrimSpace(rec.Body.String())}
		}
		return &CallError{Status: rec.Code, Code: e.Error.Code, Message: e.Error.Message}
	}
	if out != nil && rec.Body.Len() > 0 {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			return fmt.Errorf("call %s %s: decode answer: %w", method, path, err)
		}
	}
	return nil
}
