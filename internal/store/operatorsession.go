package store

import (
	"context"
	"time"
)

// OperatorSession is a browser session of the operator dashboard (/ui/),
// made by signing in with an operator key. Only the SHA-256 of the
// session's token and of the key signed in with are kept: every request
// checks that key again, so revoking it (or changing --api-key) ends its
// sessions at once on every node.
type OperatorSession struct {
	ID string
	// KeyHash is the SHA-256 of the operator key signed in with.
	KeyHash   [32]byte
	ExpiresAt time.Time
	CreatedAt time.Time
}

// OperatorSessionStore keeps operator dashboard sessions.
type OperatorSessionStore interface {
	// OperatorSessionCreate stores a new session lasting p.TTL from Now,
	// deleting sessions that ended.
	OperatorSessionCreate(ctx context.Context, p *OperatorSessionCreateParams) (*OperatorSession, error)
	// OperatorSessionGet returns the live session whose token hashes to
	// p.SessionHash, or ErrNotFound (never made, ended or expired).
	OperatorSessionGet(ctx context.Context, p *OperatorSessionGetParams) (*OperatorSession, error)
	// OperatorSessionEnd deletes one session; an unknown id gives
	// ErrNotFound.
	OperatorSessionEnd(ctx context.Context, p *OperatorSessionEndParams) error
}

// OperatorSessionCreateParams makes a session. The store makes the id.
type OperatorSessionCreateParams struct {
	SessionHash [32]byte
	KeyHash     [32]byte
	TTL         time.Duration
	Now         time.Time
}

// OperatorSessionGetParams names a session by the SHA-256 of its token.
type OperatorSessionGetParams struct {
	SessionHash [32]byte
	Now         time.Time
}

// OperatorSessionEndParams names one session.
type OperatorSessionEndParams struct {
	ID string
}

// PrefixOperatorSession starts the id of an operator session.
const PrefixOperatorSession = "os_"
