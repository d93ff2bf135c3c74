package store

import (
	"context"
	"errors"
	"time"
)

// ErrPortalLinkUsed: the portal link was opened already; a link gives one
// session only.
var ErrPortalLinkUsed = errors.New("the portal link was used already")

// ErrPortalLinkExpired: the portal link was not opened before it expired.
var ErrPortalLinkExpired = errors.New("the portal link has expired")

// PortalSession is one portal link and, once the link is opened, the
// browser session it became. Only the SHA-256 of the link's token and of
// the session's token are kept.
type PortalSession struct {
	ID         string
	ConsumerID string
	// LinkExpiresAt is when the link stops opening.
	LinkExpiresAt time.Time
	// ExchangedAt is when the link was opened; nil while it was not.
	ExchangedAt *time.Time
	// ExpiresAt is when the session ends; nil while the link was not opened.
	ExpiresAt *time.Time
	CreatedAt time.Time
}

// PortalSessionStore keeps portal links and the sessions they become
// (API.md, "Portal sessions").
type PortalSessionStore interface {
	// PortalSessionCreate stores a new link for p.ConsumerID that opens
	// until Now + LinkTTL. It also deletes that consumer's links and
	// sessions that ended by Now (a link not opened in time, a session
	// past its expiry), so a consumer's rows do not pile up.
	PortalSessionCreate(ctx context.Context, p *PortalSessionCreateParams) (*PortalSession, error)
	// PortalSessionExchange opens the link whose token hashes to
	// p.LinkHash: in one conditional write, it becomes a session known by
	// p.SessionHash that lasts until Now + SessionTTL. Two callers racing
	// on one link get one session: the other gets ErrPortalLinkUsed. An
	// expired link gives ErrPortalLinkExpired, an unknown (or revoked) one
	// ErrNotFound.
	PortalSessionExchange(ctx context.Context, p *PortalSessionExchangeParams) (*PortalSession, error)
	// PortalSessionGet returns the live session whose token hashes to
	// p.SessionHash, or ErrNotFound (ended, expired at Now, revoked or
	// never made). The portal reads it on every request, so a revocation
	// holds at once on every node.
	PortalSessionGet(ctx context.Context, p *PortalSessionGetParams) (*PortalSession, error)
	// PortalSessionEnd deletes one link or session; an unknown id gives
	// ErrNotFound.
	PortalSessionEnd(ctx context.Context, p *PortalSessionEndParams) error
	// PortalSessionRevokeConsumer deletes every link and session of
	// p.ConsumerID and says how many there were.
	PortalSessionRevokeConsumer(ctx context.Context, p *PortalSessionRevokeConsumerParams) (int, error)
}

// PortalSessionCreateParams makes a link. The store makes the id.
type PortalSessionCreateParams struct {
	ConsumerID string
	LinkHash   [32]byte
	LinkTTL    time.Duration
	Now        time.Time
}

// PortalSessionExchangeParams opens a link.
type PortalSessionExchangeParams struct {
	LinkHash    [32]byte
	SessionHash [32]byte
	SessionTTL  time.Duration
	Now         time.Time
}

// PortalSessionGetParams names a session by the SHA-256 of its token.
type PortalSessionGetParams struct {
	SessionHash [32]byte
	Now         time.Time
}

// PortalSessionEndParams names one link or session.
type PortalSessionEndParams struct {
	ID string
}

// PortalSessionRevokeConsumerParams names the consumer whose links and
// sessions all end.
type PortalSessionRevokeConsumerParams struct {
	ConsumerID string
}

// PrefixPortalSession starts the id of a portal link and its session.
const PrefixPortalSession = "ps_"
