// Package api serves Herald's HTTP API (API.md): the /v1 resources
// (endpoints, events, deliveries, stats, API keys), each call authenticated
// by a bearer API key and held to its scope by the rule its route declares
// (scope.go), the unauthenticated probes /healthz and /readyz, and
// /openapi.json, the OpenAPI 3.1 description of all of it (openapi.json at
// the module root). The tests hold that document to Routes and to every
// answer they receive, so the two cannot drift apart.
//
// Requests and answers are typed structs (json.go); every failure answers
// {"error":{"code","message"}}, where the code is machine-readable and the
// message names the field and the rule it broke (invariant 8). Store errors
// map to 404 (store.ErrNotFound), 409 (store.ErrConflict) or 500; the detail
// of a 500 stays in the log and never reaches the client.
//
// One file per resource: endpoints.go, events.go, deliveries.go, stats.go,
// apikeys.go, eventtypes.go.
package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/auth"
	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/logkey"
	"github.com/heraldhooks/herald/internal/ratelimit"
	"github.com/heraldhooks/herald/internal/schema"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/trace"
	"github.com/heraldhooks/herald/internal/wire"
)

// DefaultMaxPayloadBytes bounds an event payload when Config leaves it zero.
const DefaultMaxPayloadBytes = 256 << 10

// Limits on request bodies other than a single event's payload.
const (
	// maxSmallBody bounds the bodies of every call but event ingest: an
	// endpoint's settings, a replay filter.
	maxSmallBody = 1 << 20
	// envelopeSlack is what a request body may hold beyond its payloads:
	// the other fields of an event and the JSON around them.
	envelopeSlack = 64 << 10
	// MaxBatchEvents is the most events one POST /v1/events/batch takes.
	MaxBatchEvents = 1000
	// defaultMaxBatchBytes bounds a batch request body when Config leaves
	// MaxBatchBytes zero.
	defaultMaxBatchBytes = 16 << 20
	// pingTimeout bounds the database check of /readyz.
	pingTimeout = 3 * time.Second
)

// Config wires a Server.
type Config struct {
	// Store keeps everything; required.
	Store store.Store
	// Clock gives the time handed to the store (StoreNow, so the database
	// clock decides in production). Default clock.Real.
	Clock clock.Clock
	// Logger receives the detail of internal errors. Default: discard.
	Logger *slog.Logger
	// APIKeyHash is the SHA-256 of the operator key given with --api-key
	// (or made on first start), which every /v1 call may present as
	// "Authorization: Bearer <key>". Keys made through /v1/api-keys are
	// found in Store. The zero value matches no key.
	APIKeyHash [32]byte
	// AllowPrivateNetworks lets endpoint URLs name loopback, private,
	// link-local and metadata addresses.
	AllowPrivateNetworks bool
	// MaxPayloadBytes bounds one event's payload (default 256 KiB).
	MaxPayloadBytes int
	// MaxEndpointsPerConsumer is how many endpoints a consumer may have
	// for a consumer's call (its key, its portal session) to create
	// another: past it, 409 too_many_endpoints. 0: no limit. Operator keys
	// are not held to it.
	MaxEndpointsPerConsumer int
	// MaxBatchBytes bounds the whole body of POST /v1/events/batch (default
	// 16 MiB, and never less than one largest event).
	MaxBatchBytes int
	// CatalogRefresh is how often at most this node looks for changes to
	// the event type catalog made through other nodes (default
	// schema.DefaultRefresh, one second): the longest a schema written
	// elsewhere goes unenforced here. Writes made through this node apply
	// to its next ingest.
	CatalogRefresh time.Duration
	// Notify, when set, receives a herald.endpoint.disabled notification
	// when an operator key disables an enabled endpoint (POST
	// /v1/endpoints/{id}/disable). Herald ingests no event for that (its
	// herald.* events tell of what Herald does itself), but mails the
	// endpoint's owner about it (--smtp-url). It must not block.
	Notify func(herald.Notification)
	// Confirmations, when set, mails a new notice address the link
	// that confirms it (--smtp-url). Nil: this server sends no mail, and
	// the answers about notice addresses say so.
	Confirmations ConfirmationMailer
	// ConsumerRateLimit holds the /v1 calls of each consumer key and each
	// portal session to a token bucket (--consumer-rate-limit); past it,
	// 429 rate_limited with Retry-After. OperatorRateLimit does the same
	// for each operator key (--operator-rate-limit). A zero Rate is no
	// limit. The buckets are shared by every node over Store
	// (store.RequestBucketStore), taken in lots (requestLimiter).
	ConsumerRateLimit, OperatorRateLimit ratelimit.Rate
	// RequestLimitFailedOpen, when set, is told of every take from the
	// shared request buckets that failed, after which the node's own
	// bucket alone held the key (the metrics count them).
	RequestLimitFailedOpen func()
	// Trace records a span for each call (continuing the caller's
	// traceparent) and for each ingest, whose context is stored with the
	// events it writes. Nil: tracing is off.
	Trace *trace.Tracing
}

// Server is the HTTP API. It is an http.Handler, safe for concurrent use.
type Server struct {
	store        store.Store
	clock        clock.Clock
	log          *slog.Logger
	auth         *auth.Authenticator
	allowPrivate bool
	maxPayload   int
	maxBatchBody int64
	// maxEndpoints is Config.MaxEndpointsPerConsumer.
	maxEndpoints int
	schemas      *schema.Cache
	notify       func(herald.Notification)
	confirm      ConfirmationMailer
	limits       requestLimiter
	trace        *trace.Tracing
	mux          *http.ServeMux
}

// New returns the API handler for cfg, filling defaults for zero fields.
func New(cfg Config) *Server {
	s := &Server{
		store:        cfg.Store,
		clock:        cfg.Clock,
		log:          cfg.Logger,
		allowPrivate: cfg.AllowPrivateNetworks,
		maxPayload:   cfg.MaxPayloadBytes,
		maxBatchBody: int64(cfg.MaxBatchBytes),
		maxEndpoints: cfg.MaxEndpointsPerConsumer,
		notify:       cfg.Notify,
		confirm:      cfg.Confirmations,
		trace:        cfg.Trace,
		mux:          http.NewServeMux(),
	}
	if s.clock == nil {
		s.clock = clock.Real{}
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.limits = requestLimiter{
		consumer: cfg.ConsumerRateLimit, operator: cfg.OperatorRateLimit,
		shared: cfg.Store, log: s.log, failedOpen: cfg.RequestLimitFailedOpen,
	}
	if s.maxPayload <= 0 {
		s.maxPayload = DefaultMaxPayloadBytes
	}
	if s.maxBatchBody <= 0 {
		s.maxBatchBody = defaultMaxBatchBytes
	}
	if floor := int64(s.maxPayload) + envelopeSlack; s.maxBatchBody < floor {
		s.maxBatchBody = floor
	}
	s.schemas = schema.NewCache(schema.CacheConfig{
		Store: cfg.Store, Clock: s.clock, Refresh: cfg.CatalogRefresh, Logger: s.log,
	})
	s.auth = auth.New(auth.Config{
		Keys: cfg.Store, OperatorKeyHash: cfg.APIKeyHash, Clock: s.clock, Logger: s.log,
	})
	for _, rt := range s.routes() {
		if err := checkRoute(rt); err != nil {
			panic(err) // a programming error, found by every test that builds a Server
		}
		s.handle(rt)
	}
	return s
}

// Route is one call the API serves: a method and a path pattern as
// net/http.ServeMux reads them ("{id}" is one path segment), and the scope
// rule every call of it passes before its handler runs. The same list
// builds the mux and is checked against openapi.json, so neither can drift.
type Route struct {
	Method string
	Path   string
	Access Access

	handler handlerFunc
}

// Routes lists every call the API serves; GET routes also answer HEAD.
// /metrics and /ui/ are mounted beside the API by the app, not here.
func Routes() []Route {
	return (&Server{}).routes()
}

func (s *Server) routes() []Route {
	return []Route{
		{"GET", "/healthz", AccessPublic, s.healthz},
		{"GET", "/readyz", AccessPublic, s.readyz},
		{"GET", "/openapi.json", AccessPublic, s.openAPI},

		{"POST", "/v1/endpoints", AccessConsumerBody, s.endpointCreate},
		{"GET", "/v1/endpoints", AccessConsumerQuery, s.endpointList},
		{"GET", "/v1/endpoints/{id}", AccessEndpoint, s.endpointGet},
		{"PATCH", "/v1/endpoints/{id}", AccessEndpoint, s.endpointUpdate},
		{"DELETE", "/v1/endpoints/{id}", AccessEndpoint, s.endpointDelete},
		{"POST", "/v1/endpoints/{id}/rotate-secret", AccessEndpoint, s.endpointRotateSecret},
		{"POST", "/v1/endpoints/{id}/enable", AccessEndpoint, s.endpointEnable},
		{"POST", "/v1/endpoints/{id}/disable", AccessEndpoint, s.endpointDisable},
		{"POST", "/v1/endpoints/{id}/replay", AccessEndpoint, s.endpointReplay},
		{"POST", "/v1/endpoints/{id}/test", AccessEndpoint, s.endpointTest},
		{"POST", "/v1/endpoints/{id}/filter-test", AccessEndpoint, s.endpointFilterTest},

		// Events come from the operator's application, not from its
		// customers: a consumer key reads and replays its events only.
		{"POST", "/v1/events", AccessOperator, s.eventIngest},
		{"POST", "/v1/events/batch", AccessOperator, s.eventIngestBatch},
		{"GET", "/v1/events", AccessConsumerQuery, s.eventList},
		{"GET", "/v1/events/{id}", AccessEvent, s.eventGet},
		{"POST", "/v1/events/{id}/replay", AccessEvent, s.eventReplay},

		{"GET", "/v1/deliveries", AccessConsumerQuery, s.deliveryList},
		{"GET", "/v1/deliveries/{id}", AccessDelivery, s.deliveryGet},
		{"GET", "/v1/deliveries/{id}/attempts", AccessDelivery, s.attemptList},
		{"POST", "/v1/deliveries/{id}/replay", AccessDelivery, s.deliveryReplay},
		{"POST", "/v1/deliveries/{id}/cancel", AccessDelivery, s.deliveryCancel},

		{"GET", "/v1/stats", AccessConsumerQuery, s.stats},
		// The activity series is every consumer's together.
		{"GET", "/v1/stats/series", AccessOperator, s.statsSeries},

		{"POST", "/v1/api-keys", AccessOperator, s.apiKeyCreate},
		{"GET", "/v1/api-keys", AccessOperator, s.apiKeyList},
		{"GET", "/v1/api-keys/{id}", AccessOperator, s.apiKeyGet},
		{"DELETE", "/v1/api-keys/{id}", AccessOperator, s.apiKeyRevoke},

		// The catalog is the operator's to write; it names no consumer's
		// data, so every key reads it (the portal's event type picker).
		{"POST", "/v1/event-types", AccessOperator, s.eventTypeCreate},
		{"GET", "/v1/event-types", AccessAnyKey, s.eventTypeList},
		{"GET", "/v1/event-types/{name}", AccessAnyKey, s.eventTypeGet},
		{"PATCH", "/v1/event-types/{name}", AccessOperator, s.eventTypeUpdate},
		{"DELETE", "/v1/event-types/{name}", AccessOperator, s.eventTypeDelete},

		{"POST", "/v1/consumers/{consumer_id}/portal-sessions", AccessOperator, s.portalSessionCreate},
		{"DELETE", "/v1/consumers/{consumer_id}/portal-sessions", AccessOperator, s.portalSessionRevoke},
		{"GET", "/v1/consumers/{consumer_id}/notifications", AccessConsumerPath, s.noticeAddressGet},
		{"PUT", "/v1/consumers/{consumer_id}/notifications", AccessConsumerPath, s.noticeAddressPut},
		{"POST", "/v1/consumers/{consumer_id}/notifications/confirm", AccessConsumerPath, s.noticeAddressConfirm},
	}
}

// handlerFunc serves one call; a returned error becomes the error answer.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// handle mounts rt: every call passes its principal's request limit
// (limitRequest) and its scope rule (authorize) before its handler runs.
func (s *Server) handle(rt Route) {
	s.mux.HandleFunc(rt.Method+" "+rt.Path, func(w http.ResponseWriter, r *http.Request) {
		err := plainText(r)
		if p, ok := auth.FromContext(r.Context()); ok && err == nil && rt.Access != AccessPublic {
			err = s.limitRequest(w, r, p)
		}
		var scoped *http.Request
		if err == nil {
			scoped, err = s.authorize(r, rt.Access)
		}
		if err == nil {
			err = rt.handler(w, scoped)
		}
		if err != nil {
			s.writeError(w, r, err)
		}
	})
}

// ServeHTTP authenticates /v1 calls, then routes. Unknown paths answer 404
// and known paths with the wrong method 405 with an Allow header, both as
// JSON errors. Authentication comes first, so without a key nothing, not even
// which paths exist, is revealed.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.trace.On() {
		s.serveTraced(w, r)
		return
	}
	s.serve(w, r)
}

// serve is ServeHTTP without its span.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("api handler panicked", "method", r.Method, "path", r.URL.Path, logkey.ClientAddr, r.RemoteAddr, "panic", fmt.Sprint(v))
			writeErr(w, http.StatusInternalServerError, "internal_error", "internal error; see the server log")
		}
	}()
	if r.URL.Path == "/v1" || strings.HasPrefix(r.URL.Path, "/v1/") {
		p, err := s.authenticate(r)
		if err != nil {
			var ae *apiError
			if errors.As(err, &ae) && ae.status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="herald"`)
			}
			s.writeError(w, r, err)
			return
		}
		r = r.WithContext(auth.WithPrincipal(r.Context(), p))
	}
	if _, pattern := s.mux.Handler(r); pattern == "" {
		s.noRoute(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// noRoute answers a request no pattern matches: the mux says whether the
// path is unknown (404) or the method is wrong (405, with Allow).
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	h, _ := s.mux.Handler(r)
	probe := &statusProbe{header: http.Header{}}
	h.ServeHTTP(probe, r)
	if probe.status == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", probe.header.Get("Allow"))
		writeErr(w, http.StatusMethodNotAllowed, "method_not_allowed",
			fmt.Sprintf("%s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, probe.header.Get("Allow")))
		return
	}
	writeErr(w, http.StatusNotFound, "not_found", fmt.Sprintf("no such path: %s %s", r.Method, r.URL.Path))
}

// statusProbe records the status a handler writes and discards the body.
type statusProbe struct {
	header http.Header
	status int
}

func (p *statusProbe) Header() http.Header { return p.header }
func (p *statusProbe) WriteHeader(code int) {
	if p.status == 0 {
		p.status = code
	}
}
func (p *statusProbe) Write(b []byte) (int, error) {
	p.WriteHeader(http.StatusOK)
	return len(b), nil
}

// authenticate finds who presents the bearer key (auth.Authenticator: the
// operator key of the configuration, or a key made through /v1/api-keys,
// read from the store on every call so a revocation holds at once).
func (s *Server) authenticate(r *http.Request) (auth.Principal, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return auth.Principal{}, &apiError{http.StatusUnauthorized, "unauthorized", "missing the Authorization: Bearer <api key> header"}
	}
	scheme, key, ok := strings.Cut(h, " ")
	key = strings.TrimSpace(key)
	if !ok || !strings.EqualFold(scheme, "Bearer") || key == "" {
		return auth.Principal{}, &apiError{http.StatusUnauthorized, "unauthorized", "the Authorization header must be Bearer <api key>"}
	}
	p, err := s.auth.Authenticate(r.Context(), key)
	if errors.Is(err, auth.ErrInvalidKey) {
		return auth.Principal{}, &apiError{http.StatusUnauthorized, "unauthorized", "the API key is not valid"}
	}
	if err != nil {
		return auth.Principal{}, err
	}
	return p, nil
}

// apiError is an answer with a 4xx or 5xx status, a machine-readable code and
// a message that names the field and the rule.
type apiError struct {
	status  int
	code    string
	message string
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

// badRequest is a 400 with code and message.
func badRequest(code, format string, args ...any) *apiError {
	return &apiError{http.StatusBadRequest, code, fmt.Sprintf(format, args...)}
}

// storeError turns the error of the store operation op about the kind
// (endpoint, event, delivery) named id into its answer: 404, 409, or the
// error wrapped with op (a 500). The store's own text never reaches the
// client; callers that can say more about a conflict do so first.
func storeError(op string, err error, kind, id string) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return &apiError{http.StatusNotFound, "not_found", fmt.Sprintf("no %s has id %q", kind, id)}
	case errors.Is(err, store.ErrConflict):
		return &apiError{http.StatusConflict, "conflict", fmt.Sprintf("%s %s is not in a state that allows this call", kind, id)}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// writeError answers err. Errors that are not *apiError are internal: their
// detail goes to the log and the client gets a generic 500.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		// A store that returns a bare sentinel still maps cleanly.
		if errors.Is(err, store.ErrNotFound) {
			ae = &apiError{http.StatusNotFound, "not_found", "not found"}
		} else if errors.Is(err, store.ErrConflict) {
			ae = &apiError{http.StatusConflict, "conflict", "the current state of the resource does not allow this call"}
		} else {
			s.log.Error("api call failed", "method", r.Method, "path", r.URL.Path, logkey.ClientAddr, r.RemoteAddr, logkey.Error, err)
			ae = &apiError{http.StatusInternalServerError, "internal_error", "internal error; see the server log"}
		}
	}
	writeErr(w, ae.status, ae.code, ae.message)
}

func writeErr(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, wire.Error{Error: wire.ErrorDetail{Code: code, Message: message}})
}

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := marshal(v)
	if err != nil {
		// Only our own answer types reach here; they always marshal.
		b = []byte(`{"error":{"code":"internal_error","message":"internal error; see the server log"}}`)
		status = http.StatusInternalServerError
	}
	writeRaw(w, status, b)
}

// writeRaw answers b, which is already JSON, with status.
func writeRaw(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(b)
	w.Write([]byte{'\n'})
}

// marshal encodes v without escaping <, > and &, which JSON does not need.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// readBody reads at most limit bytes of the request body; a larger body is a
// 413 with tooLargeCode.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, tooLargeCode string) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &apiError{http.StatusRequestEntityTooLarge, tooLargeCode,
				fmt.Sprintf("request body is larger than %d bytes", limit)}
		}
		return nil, badRequest("invalid_body", "could not read the request body: %v", err)
	}
	return body, nil
}

// decodeBody reads the request body (at most limit bytes) and decodes it
// into dst, rejecting unknown fields. An empty body is allowed only when
// optional is set, and then leaves dst as it is. It returns the body read.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, optional bool, dst any) ([]byte, error) {
	body, err := readBody(w, r, limit, "body_too_large")
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if optional {
			return body, nil
		}
		return nil, badRequest("invalid_json", "the request body is empty; it must be a JSON object")
	}
	return body, decodeJSON(body, dst)
}

// decodeJSON decodes one JSON object from body into dst, strictly: unknown
// fields, a value of the wrong type and anything after the object are errors
// that name what is wrong.
func decodeJSON(body []byte, dst any) error {
	return decodeJSONDurations(body, dst, nil)
}

// decodeJSONDurations is decodeJSON with durationError answering a
// wire.Duration that is not a Go duration string, given the field's JSON
// path ("timeout", "retry_policy.base"), so that a request can refuse it
// with the field's own code. Without it the answer is invalid_type.
func decodeJSONDurations(body []byte, dst any, durationError func(field string) error) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		var typ *json.UnmarshalTypeError
		if durationError != nil && errors.As(err, &typ) && typ.Type == wire.DurationType {
			return durationError(typ.Field)
		}
		return jsonError(err)
	}
	if rest := bytes.TrimSpace(body[dec.InputOffset():]); len(rest) > 0 {
		return badRequest("invalid_json", "the request body must hold one JSON object, but more follows at byte %d", dec.InputOffset())
	}
	return checkMemberNames(body, dst)
}

// jsonError explains a decoding error.
func jsonError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return badRequest("invalid_json", "the request body is not valid JSON: %s (at byte %d)", strings.TrimPrefix(syn.Error(), "json: "), syn.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return badRequest("invalid_json", "the request body is not valid JSON: it ends too early")
	case errors.As(err, &typ):
		if typ.Field == "" {
			return badRequest("invalid_json", "the request body must be a JSON object, not a JSON %s", typ.Value)
		}
		return badRequest("invalid_type", "%s must be %s, not a JSON %s", typ.Field, jsonKind(typ.Type.String()), typ.Value)
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return badRequest("unknown_field", "unknown field %s", name)
	}
	return badRequest("invalid_json", "the request body is not valid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// jsonKind names in JSON terms the Go type a field decodes into.
func jsonKind(goType string) string {
	goType = strings.TrimLeft(goType, "*")
	switch {
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "a boolean"
	case strings.HasPrefix(goType, "int") || strings.HasPrefix(goType, "uint"):
		return "an integer"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.HasPrefix(goType, "map["):
		return "an object"
	case goType == "json.RawMessage":
		return "a JSON value"
	case goType == wire.DurationType.String():
		return "a Go duration string such as \"30s\""
	}
	return "an object"
}

// plainText refuses, before the scope rule or the store sees them, a
// path's {id} and query values that no text column can hold: a NUL byte
// or invalid UTF-8, which PostgreSQL refuses with an error (a 500 that
// any key, a portal page's address included, could provoke and fill the
// log with). Such an id names nothing, so it answers 404 not_found as an
// id that does not exist; such a query value is 400 invalid_parameter.
func plainText(r *http.Request) error {
	if id := r.PathValue("id"); !isText(id) {
		return &apiError{http.StatusNotFound, "not_found", fmt.Sprintf("nothing has id %q", id)}
	}
	for name, values := range r.URL.Query() {
		for _, v := range append(values, name) {
			if !isText(v) {
				return badRequest("invalid_parameter",
					"query parameter %q is not text: it holds a NUL byte or invalid UTF-8", name)
			}
		}
	}
	return nil
}

// isText reports whether s is valid UTF-8 without a NUL byte.
func isText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// checkQuery rejects query parameters other than allowed, so a misspelt
// filter is an error rather than a silently unfiltered list.
func checkQuery(q url.Values, allowed ...string) error {
	for name := range q {
		ok := false
		for _, a := range allowed {
			if name == a {
				ok = true
				break
			}
		}
		if !ok {
			return badRequest("unknown_parameter", "unknown query parameter %q; allowed: %s", name, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// cursorTag starts every cursor the API hands out, so a cursor from
// elsewhere is refused rather than passed to the store.
const cursorTag = "hc1:"

// pageParams reads ?limit= and ?cursor=.
func pageParams(q url.Values) (limit int, cursor string, err error) {
	limit = store.DefaultListLimit
	if v := q.Get("limit"); v != "" || q.Has("limit") {
		n, perr := strconv.Atoi(v)
		if perr != nil || n < 1 || n > store.MaxListLimit {
			return 0, "", badRequest("invalid_limit", "limit must be an integer from 1 to %d", store.MaxListLimit)
		}
		limit = n
	}
	if v := q.Get("cursor"); v != "" {
		raw, derr := base64.RawURLEncoding.DecodeString(v)
		c, ok := strings.CutPrefix(string(raw), cursorTag)
		// The decoder also takes spellings encodeCursor never writes (set
		// padding bits, line breaks); a cursor is only the one it wrote. It
		// holds an id, printable ASCII: anything else would reach the store
		// (PostgreSQL refuses a NUL byte or invalid UTF-8 as text) and fail
		// there as a 500.
		if derr != nil || !ok || c == "" || encodeCursor(c) != v ||
			strings.IndexFunc(c, func(r rune) bool { return r < '!' || r > '~' }) >= 0 {
			return 0, "", badRequest("invalid_cursor", "cursor must be a next_cursor value from an earlier page of this list")
		}
		cursor = c
	}
	return limit, cursor, nil
}

// encodeCursor makes the store's cursor opaque; "" stays "" (the last page).
func encodeCursor(c string) string {
	if c == "" {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString([]byte(cursorTag + c))
}

// parseTime reads the optional RFC 3339 time v of field.
func parseTime(field, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, badRequest("invalid_"+field, "%s must be an RFC 3339 time such as 2024-05-01T12:00:00Z", field)
	}
	return t.UTC(), nil
}

// timeRange checks since < until when both are set.
func timeRange(since, until time.Time) error {
	if !since.IsZero() && !until.IsZero() && !since.Before(until) {
		return badRequest("invalid_until", "until must be after since")
	}
	return nil
}

// storeNow is the time handed to the store.
func (s *Server) storeNow() time.Time { return s.clock.StoreNow() }

// pingContext bounds the readiness check.
func pingContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, pingTimeout)
}
