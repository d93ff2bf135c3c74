package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/heraldhooks/herald/internal/auth"
	"github.com/heraldhooks/herald/internal/store"
)

// Access is a route's scope rule: who may make the call, and how a
// consumer key is held to its consumer (API.md, "API keys and scopes").
// Every route declares one, and authorize, the one place that applies
// them, runs before every handler: New refuses a route without a rule, so
// no call can be added that skips the decision. Operator keys pass every
// rule; the rules below say what a consumer key meets.
type Access int

const (
	accessUndeclared Access = iota
	// AccessPublic needs no key: the probes and the API document, outside
	// /v1.
	AccessPublic
	// AccessOperator is for operator keys only; a consumer key is answered
	// 403 forbidden.
	AccessOperator
	// AccessConsumerQuery reads ?consumer_id=: a consumer key's call is
	// filtered to its consumer (the parameter is set for it), and naming
	// another consumer is 403 forbidden.
	AccessConsumerQuery
	// AccessConsumerBody creates something owned by the body's consumer_id:
	// a consumer key's defaults to its consumer, and naming another is 403
	// forbidden.
	AccessConsumerBody
	// AccessEndpoint, AccessEvent and AccessDelivery: the path's {id} names
	// an endpoint, an event or a delivery. Another consumer's answers 404
	// not_found, exactly as an id that does not exist, so ids cannot be
	// probed.
	AccessEndpoint
	AccessEvent
	AccessDelivery
	// AccessAnyKey is for every key, consumer keys alike: reads of what
	// belongs to no consumer (the event type catalog).
	AccessAnyKey
	// AccessConsumerPath: the path's {consumer_id} names a consumer. A
	// consumer key reaches its own only; another consumer answers 404
	// not_found.
	AccessConsumerPath
	accessEnd
)

// String names the rule, as the route table and its tests show it.
func (a Access) String() string {
	switch a {
	case AccessPublic:
		return "public"
	case AccessOperator:
		return "operator"
	case AccessConsumerQuery:
		return "consumer query"
	case AccessConsumerBody:
		return "consumer body"
	case AccessEndpoint:
		return "endpoint owner"
	case AccessEvent:
		return "event owner"
	case AccessDelivery:
		return "delivery owner"
	case AccessAnyKey:
		return "any key"
	case AccessConsumerPath:
		return "consumer path"
	}
	return fmt.Sprintf("undeclared (%d)", int(a))
}

// checkRoute refuses a route whose rule is missing or does not fit its
// path: public exactly outside /v1, an owner rule exactly on paths with an
// {id}.
func checkRoute(rt Route) error {
	name := rt.Method + " " + rt.Path
	if rt.Access <= accessUndeclared || rt.Access >= accessEnd {
		return fmt.Errorf("api: route %s declares no scope rule (Access)", name)
	}
	if (rt.Access == AccessPublic) == strings.HasPrefix(rt.Path, "/v1/") {
		return fmt.Errorf("api: route %s: only the routes outside /v1 are public, and all of them", name)
	}
	owner := rt.Access == AccessEndpoint || rt.Access == AccessEvent || rt.Access == AccessDelivery
	if owner != strings.Contains(rt.Path, "{id}") && rt.Access != AccessOperator {
		return fmt.Errorf("api: route %s: a path with {id} needs the rule of its owner, and only such a path has one", name)
	}
	if rt.Access == AccessConsumerPath && !strings.Contains(rt.Path, "{consumer_id}") {
		return fmt.Errorf("api: route %s: the consumer path rule needs {consumer_id} in the path", name)
	}
	return nil
}

// forbidden is the 403 answer of a call a consumer key may not make.
func forbidden(format string, args ...any) *apiError {
	return &apiError{http.StatusForbidden, "forbidden", fmt.Sprintf(format, args...)}
}

// authorize applies rule to r: it returns the request the handler is to
// serve (for a consumer key, with its consumer filled in where the rule
// says so) or the error to answer instead. ServeHTTP has already
// authenticated every /v1 call and put its principal in the context.
func (s *Server) authorize(r *http.Request, rule Access) (*http.Request, error) {
	if rule == AccessPublic {
		return r, nil
	}
	p, ok := auth.FromContext(r.Context())
	if !ok {
		// Not reached: ServeHTTP authenticates every /v1 call. Fail closed.
		return nil, &apiError{http.StatusUnauthorized, "unauthorized", "missing the Authorization: Bearer <api key> header"}
	}
	if p.IsOperator() {
		return r, nil
	}
	switch rule {
	case AccessAnyKey:
		return r, nil
	case AccessOperator:
		return nil, forbidden("this call needs an operator key; this key reaches consumer %s's endpoints, events and deliveries only",
			p.ConsumerID)
	case AccessConsumerQuery:
		return consumerQuery(r, p)
	case AccessConsumerBody:
		return consumerBody(r, p)
	case AccessConsumerPath:
		return consumerPath(r, p)
	case AccessEndpoint:
		id := r.PathValue("id")
		ep, err := s.store.EndpointGet(r.Context(), id)
		return ownedBy(r, p, "endpoint", id, func() string { return ep.ConsumerID }, err)
	case AccessEvent:
		id := r.PathValue("id")
		ev, err := s.store.EventGet(r.Context(), id)
		return ownedBy(r, p, "event", id, func() string { return ev.ConsumerID }, err)
	case AccessDelivery:
		id := r.PathValue("id")
		d, err := s.store.DeliveryGet(r.Context(), id)
		return ownedBy(r, p, "delivery", id, func() string { return d.ConsumerID }, err)
	}
	return nil, fmt.Errorf("authorize: route %s %s has no scope rule", r.Method, r.URL.Path)
}

// ownedBy lets r through when the resource the store read (err nil) is of
// a consumer p reaches; another consumer's answers as a missing id does.
func ownedBy(r *http.Request, p auth.Principal, kind, id string, owner func() string, err error) (*http.Request, error) {
	if err != nil {
		return nil, storeError("get "+kind, err, kind, id)
	}
	if !p.Reaches(owner()) {
		return nil, storeError("get "+kind, store.ErrNotFound, kind, id)
	}
	return r, nil
}

// consumerQuery holds ?consumer_id= to p's consumer: absent or empty, it
// is set; naming another consumer is forbidden.
func consumerQuery(r *http.Request, p auth.Principal) (*http.Request, error) {
	q := r.URL.Query()
	for _, v := range q["consumer_id"] {
		if v != "" && !p.Reaches(v) {
			return nil, forbidden("consumer_id names another consumer; this key reaches consumer %s only", p.ConsumerID)
		}
	}
	q.Set("consumer_id", p.ConsumerID)
	r2 := r.Clone(r.Context())
	r2.URL.RawQuery = q.Encode()
	return r2, nil
}

// consumerBody holds a JSON body's consumer_id to p's consumer: absent or
// null, it is set; naming another consumer is forbidden. A member whose
// name is consumer_id in any other spelling is forbidden too when it names
// another consumer (it is the handler's to refuse otherwise), so no reading
// of the body can find another consumer in it. The body keeps its bytes
// but for the consumer_id written in, so the handler judges it as sent. A
// body that is too large or not a JSON object goes on unchanged, for the
// handler to refuse as it refuses any such body.
func consumerBody(r *http.Request, p auth.Principal) (*http.Request, error) {
	orig := r.Body
	body, err := io.ReadAll(io.LimitReader(orig, maxSmallBody+1))
	if err != nil {
		return nil, badRequest("invalid_body", "could not read the request body: %v", err)
	}
	r2 := r.Clone(r.Context())
	pass := func(b []byte) *http.Request {
		r2.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(b), orig), orig}
		r2.ContentLength = -1
		if len(b) <= maxSmallBody {
			r2.ContentLength = int64(len(b))
		}
		return r2
	}
	if len(body) > maxSmallBody {
		return pass(body), nil
	}
	members, ok := topMembers(body)
	if !ok {
		return pass(body), nil
	}
	given := false // an exact consumer_id that is not null
	var nulls []member
	for _, m := range members {
		if !strings.EqualFold(m.name, "consumer_id") {
			continue
		}
		var v *string
		if err := json.Unmarshal(m.value, &v); err != nil {
			return pass(body), nil // not a string: the handler says so
		}
		switch {
		case v != nil && *v != "" && !p.Reaches(*v): // "" is invalid: the handler says so
			return nil, forbidden("consumer_id names another consumer; this key reaches consumer %s only", p.ConsumerID)
		case m.name != "consumer_id":
		case v == nil:
			nulls = append(nulls, m)
		default:
			given = true
		}
	}
	if given {
		return pass(body), nil // its own consumer, as given
	}
	own, err := json.Marshal(p.ConsumerID)
	if err != nil {
		return nil, fmt.Errorf("authorize: %w", err)
	}
	if len(nulls) == 0 {
		// Written in as the first member.
		at := members0(body)
		in := append([]byte(`"consumer_id":`), own...)
		if len(members) > 0 {
			in = append(in, ',')
		}
		return pass(slices.Concat(body[:at], in, body[at:])), nil
	}
	out := slices.Clone(body)
	for i := len(nulls) - 1; i >= 0; i-- {
		m := nulls[i]
		out = slices.Concat(out[:m.end-len("null")], own, out[m.end:])
	}
	return pass(out), nil
}

// member is one member of a JSON object: its name, its value's bytes, and
// the offset just past the value.
type member struct {
	name  string
	value json.RawMessage
	end   int
}

// topMembers lists the members of the JSON object body, in order, with
// duplicates; ok is false when body is not one JSON object.
func topMembers(body []byte) (out []member, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		name, isName := tok.(string)
		var value json.RawMessage
		if !isName || dec.Decode(&value) != nil {
			return nil, false
		}
		out = append(out, member{name: name, value: value, end: int(dec.InputOffset())})
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false // more after the object
	}
	return out, true
}

// members0 is the offset just past the opening brace of the JSON object
// body.
func members0(body []byte) int { return bytes.IndexByte(body, '{') + 1 }

// asConsumer says whether the caller sees as a consumer does (a consumer
// key, or the portal's session): what it reads of attempts' errors is
// herald.ConsumerError's.
func asConsumer(r *http.Request) bool {
	p, ok := auth.FromContext(r.Context())
	return !ok || !p.IsOperator()
}
