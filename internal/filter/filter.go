// Package filter owns endpoint filters: CEL expressions over an event
// (event_type, consumer_id, payload) that decide whether an endpoint gets
// it. It is the one place the rule lives: Compile is what an endpoint's
// save checks (syntax, types, a bool result, a cost bound), Cache keeps
// compiled programs so an ingest never compiles, and Decide is what both
// stores' fan-out and the API's filter-test run for one event and one
// endpoint.
//
// A filter is bounded twice. At save, CEL's static cost estimate of the
// expression, with every list, map and string of the payload taken as at
// most maxSize elements, must be at most MaxEstimatedCost; so a filter
// cannot nest loops over the payload or walk it without bound. At run
// time each evaluation stops past MaxRuntimeCost, a second guard for what
// the estimate assumed (a payload holding a larger list); that stop, like
// a missing field or a wrong type, is an evaluation error: the endpoint is
// skipped for that event (ReasonFilterError) and the ingest goes on. It
// fails closed, since a filter that cannot say yes has not said yes.
package filter

import (
	"encoding/json"
	"fmt"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/types"
)

// The cost bounds, in CEL's cost units (about one unit for each variable
// read, field selection, comparison or call; a string operation costs a
// tenth of a unit a byte). A filter of a few comparisons, such as
// `payload.amount > 1000 && payload.currency == 'EUR'`, estimates under
// 10; one `exists` over a payload list of maxSize items, each tested by a
// comparison or two, about 5,000. MaxEstimatedCost (10,000) admits such
// one-level walks and refuses nested ones (a million and more).
// MaxRuntimeCost (100,000) stops an evaluation that has done ten times
// the admitted work, which takes well under a millisecond: the ingest it
// runs in is never held up by one filter.
const (
	MaxEstimatedCost uint64 = 10_000
	MaxRuntimeCost   uint64 = 100_000
	// maxSize is the size the estimate assumes for each list, map and
	// string of the payload, which it cannot know at save.
	maxSize uint64 = 1_000
)

// Reasons an endpoint is skipped for an event.
const (
	// ReasonFilter: the filter evaluated to false.
	ReasonFilter = "filter"
	// ReasonFilterError: the filter could not be evaluated on this event
	// (a missing field, a wrong type, the run-time cost limit, a payload
	// that is not JSON).
	ReasonFilterError = "filter_error"
)

// Error is a filter refused at save: where (1-based line and column; 0
// when it concerns the whole expression) and why.
type Error struct {
	Line, Column int
	Reason       string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return e.Reason
	}
	return fmt.Sprintf("%d:%d: %s", e.Line, e.Column, e.Reason)
}

// Program is a compiled filter, safe for concurrent use.
type Program struct {
	src string
	prg cel.Program
	// broken is why a stored filter did not compile (Cache.Program).
	broken error
}

// Source is the expression p was compiled from.
func (p *Program) Source() string { return p.src }

// newEnv is the environment filters compile in: the three variables, and
// numbers of different kinds compared by value (a JSON number is a double,
// and `payload.amount > 1000` compares it with an int).
func newEnv() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("event_type", cel.StringType),
		cel.Variable("consumer_id", cel.StringType),
		cel.Variable("payload", cel.DynType),
		cel.CrossTypeNumericComparisons(true),
	)
}

// Compile parses, type-checks and cost-checks src. A refusal is an
// *Error naming the position and the reason.
func Compile(src string) (*Program, error) {
	// A new environment each time (no state shared by the package): a
	// filter is compiled only when saved, tried, or first met by a node
	// (Cache), so its cost is not on a hot path.
	e, err := newEnv()
	if err != nil {
		return nil, fmt.Errorf("filter environment: %w", err)
	}
	ast, iss := e.Compile(src)
	if iss != nil && iss.Err() != nil {
		errs := iss.Errors()
		if len(errs) == 0 {
			return nil, &Error{Reason: iss.Err().Error()}
		}
		first := errs[0]
		return nil, &Error{
			Line:   first.Location.Line(),
			Column: first.Location.Column() + 1,
			Reason: first.Message,
		}
	}
	if !ast.OutputType().IsExactType(types.BoolType) && !ast.OutputType().IsExactType(types.DynType) {
		return nil, &Error{Line: 1, Column: 1, Reason: fmt.Sprintf("a filter must be a bool, this is a %s", ast.OutputType())}
	}
	est, err := e.EstimateCost(ast, sizeEstimator{})
	if err != nil {
		return nil, &Error{Reason: fmt.Sprintf("cannot estimate the cost: %v", err)}
	}
	if est.Max > MaxEstimatedCost {
		return nil, &Error{Reason: fmt.Sprintf("too costly: estimated cost up to %s, the limit is %d", costString(est.Max), MaxEstimatedCost)}
	}
	prg, err := e.Program(ast, cel.CostLimit(MaxRuntimeCost))
	if err != nil {
		return nil, &Error{Reason: err.Error()}
	}
	return &Program{src: src, prg: prg}, nil
}

// costString writes an estimate, an unbounded one as such.
func costString(c uint64) string {
	if c == ^uint64(0) {
		return "unbounded"
	}
	return fmt.Sprint(c)
}

// sizeEstimator sizes every list, map and string the estimate cannot
// know (the payload's) as at most maxSize.
type sizeEstimator struct{}

func (sizeEstimator) EstimateSize(cost.AstNode) *cost.SizeEstimate {
	return &cost.SizeEstimate{Min: 0, Max: maxSize}
}

func (sizeEstimator) EstimateCallCost(string, string, *cost.AstNode, []cost.AstNode) *cost.CallEstimate {
	return nil
}

// Event is what a filter sees of one event. Its payload is parsed once,
// on the first Decide that needs it, and kept for the next endpoints.
type Event struct {
	EventType  string
	ConsumerID string
	Payload    []byte

	parsed   bool
	vars     map[string]any
	parseErr error
}

// input is the activation for e, parsing the payload the first time.
func (e *Event) input() (map[string]any, error) {
	if !e.parsed {
		e.parsed = true
		var payload any
		if len(e.Payload) > 0 {
			if err := json.Unmarshal(e.Payload, &payload); err != nil {
				e.parseErr = fmt.Errorf("payload is not JSON: %w", err)
			}
		}
		e.vars = map[string]any{"event_type": e.EventType, "consumer_id": e.ConsumerID, "payload": payload}
	}
	return e.vars, e.parseErr
}

// Eval runs p on ev: whether it passes, or why it could not say.
func (p *Program) Eval(ev *Event) (bool, error) {
	if p.broken != nil {
		return false, p.broken
	}
	vars, err := ev.input()
	if err != nil {
		return false, err
	}
	out, _, err := p.prg.Eval(vars)
	if err != nil {
		return false, err
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("the filter gave a %s, not a bool", out.Type().TypeName())
	}
	return b, nil
}

// Decide is the fan-out rule for one endpoint with program p (nil: no
// filter) and one event: "" when the endpoint gets it, else the reason it
// is skipped (ReasonFilter, ReasonFilterError).
func Decide(p *Program, ev *Event) string {
	if p == nil {
		return ""
	}
	pass, err := p.Eval(ev)
	switch {
	case err != nil:
		return ReasonFilterError
	case !pass:
		return ReasonFilter
	}
	return ""
}

// maxCached bounds the programs a Cache keeps; past it, it starts afresh.
const maxCached = 10_000

// Cache keeps compiled programs by source, so an endpoint's filter is
// compiled once per node and each of its versions (a change of its filter
// is a change of source) finds its own. Its zero value is ready for use.
type Cache struct {
	mu    sync.Mutex
	progs map[string]*Program
}

// Program returns the compiled src, or nil for "" (no filter). A stored
// source that no longer compiles (saved under other rules) gives a
// program whose every evaluation is an error, so its endpoint is skipped
// with ReasonFilterError rather than the ingest failing.
func (c *Cache) Program(src string) *Program {
	if src == "" {
		return nil
	}
	c.mu.Lock()
	p, ok := c.progs[src]
	c.mu.Unlock()
	if ok {
		return p
	}
	p, err := Compile(src)
	if err != nil {
		p = &Program{src: src, broken: err}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.progs == nil || len(c.progs) >= maxCached {
		c.progs = map[string]*Program{}
	}
	c.progs[src] = p
	return p
}
