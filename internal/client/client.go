// Package client talks to a running Herald over its HTTP API (API.md): one
// typed method per call, answers decoded into plain structs that also keep
// the JSON exactly as the server sent it (Raw), failures decoded from
// {"error":{"code","message"}} into *Error, and lists that follow
// next_cursor across pages when asked (ListOptions).
//
// The command line (internal/cli) is its user; scripts in Go may use it the
// same way.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/heraldhooks/herald/internal/wire"
)

// DefaultTimeout bounds one HTTP call when Options.HTTPClient is nil.
const DefaultTimeout = 60 * time.Second

// MaxPageSize is the most items the API returns in one page; a list that
// follows pages asks for this many at a time.
const MaxPageSize = 1000

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 64 << 10

// Client calls one Herald server with one API key. It is safe for
// concurrent use.
type Client struct {
	base      *url.URL
	apiKey    string
	hc        *http.Client
	userAgent string
}

// Options tunes a Client; the zero value is fine.
type Options struct {
	// HTTPClient sends the requests; nil means a client with DefaultTimeout.
	HTTPClient *http.Client
	// UserAgent names the caller; "" means "herald-client".
	UserAgent string
}

// New returns a client for the server at baseURL (http://host:port, with an
// optional path prefix; a bare host:port means http://) that presents
// apiKey as its bearer key. An empty key is allowed: every /v1 call then
// answers 401, which the caller may want to explain itself.
func New(baseURL, apiKey string, opts Options) (*Client, error) {
	base, err := ParseBaseURL(baseURL)
	if err != nil {
		return nil, err
	}
	c := &Client{base: base, apiKey: apiKey, hc: opts.HTTPClient, userAgent: opts.UserAgent}
	if c.hc == nil {
		c.hc = &http.Client{Timeout: DefaultTimeout}
	}
	if c.userAgent == "" {
		c.userAgent = "herald-client"
	}
	return c, nil
}

// ParseBaseURL checks a server address: http or https, a host, no query or
// fragment. "127.0.0.1:8080" is read as http://127.0.0.1:8080. A trailing
// slash is dropped.
func ParseBaseURL(s string) (*url.URL, error) {
	raw := strings.TrimSpace(s)
	if raw == "" {
		return nil, errors.New("server URL is empty")
	}
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("server URL %q: %w", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("server URL %q: the scheme must be http or https", s)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("server URL %q has no host", s)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("server URL %q: give only scheme, host, port and an optional path", s)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// BaseURL is the server address the client calls.
func (c *Client) BaseURL() string { return c.base.String() }

// Error is a failure the API answered: its HTTP status and the code and
// message of its {"error":{"code","message"}} body. Error() is
// "<code>: <message>".
type Error struct {
	StatusCode int
	Code       string
	Message    string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// IsUnauthorized reports whether the server refused the API key (401).
func (e *Error) IsUnauthorized() bool { return e.StatusCode == http.StatusUnauthorized }

// UnreachableError is a call that got no HTTP answer at all: the server is
// down, the address is wrong, or the connection broke.
type UnreachableError struct {
	// URL is the server address that was called.
	URL string
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach Herald at %s: %v", e.URL, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// do sends one call and returns the body of a 2xx answer. path starts with
// a slash and is joined to the base URL's path.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body []byte) ([]byte, error) {
	u := *c.base
	u.Path = c.base.Path + path
	if len(query) > 0 {
		u.RawQuery = query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("%s %s: %w", method, path, ctxErr)
		}
		return nil, &UnreachableError{URL: c.BaseURL(), Err: unwrapURLError(err)}
	}
	defer res.Body.Close()
	if res.StatusCode >= 400 {
		raw, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
		return nil, decodeError(res.StatusCode, raw)
	}
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, &UnreachableError{URL: c.BaseURL(), Err: fmt.Errorf("read the answer to %s %s: %w", method, path, err)}
	}
	return raw, nil
}

// unwrapURLError drops the "Get \"http://…\":" prefix url.Error adds, since
// UnreachableError names the server already.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// decodeError reads an error answer. One that is not Herald's JSON (a proxy
// in between, say) still becomes an *Error, coded by its status.
func decodeError(status int, raw []byte) *Error {
	var body wire.Error
	if json.Unmarshal(raw, &body) == nil && body.Error.Code != "" {
		return &Error{StatusCode: status, Code: body.Error.Code, Message: body.Error.Message}
	}
	msg := http.StatusText(status)
	if text := strings.TrimSpace(string(raw)); text != "" {
		if len(text) > 200 {
			text = text[:200] + "…"
		}
		msg += ": " + strings.ToValidUTF8(text, "\uFFFD")
	}
	return &Error{StatusCode: status, Code: "http_" + strconv.Itoa(status), Message: msg}
}

// rawSetter is an answer type that keeps its JSON as received.
type rawSetter interface{ setRaw(json.RawMessage) }

// call sends one call and decodes its answer into out, keeping the raw JSON.
func (c *Client) call(ctx context.Context, method, path string, query url.Values, body []byte, out rawSetter) error {
	raw, err := c.do(ctx, method, path, query, body)
	if err != nil {
		return err
	}
	return decodeInto(method+" "+path, raw, out)
}

func decodeInto(op string, raw []byte, out rawSetter) error {
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decode the answer to %s: %w", op, err)
	}
	out.setRaw(json.RawMessage(raw))
	return nil
}

// marshalBody encodes a request body.
func marshalBody(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	return b, nil
}

// pathID escapes an id for a URL path.
func pathID(id string) (string, error) {
	if strings.TrimSpace(id) == "" {
		return "", errors.New("id is empty")
	}
	return url.PathEscape(id), nil
}
