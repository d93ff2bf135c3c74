// Package notice mails a consumer's notice address when one of its
// endpoints is failing, is disabled, or lets a delivery die (--smtp-url):
// the same moments as Herald's herald.* events, for owners who watch an
// inbox rather than a webhook.
//
// Notices go to a confirmed address only: a new address is pending until
// the link mailed to it (Confirmer) is opened, so that no one can point
// Herald's mail at a stranger.
//
// Mail never slows delivery, nor the API call that set an address:
// notifications and confirmation mails are queued in memory (bounded; a
// full queue drops with a count) and one goroutine per node sends them,
// trying a failed send again after each of Config.Retries.
// At most one mail per endpoint per interval (an hour) goes out across all
// nodes: a node sends only after it moved the endpoint's last-sent time in
// the database with a conditional write (store.NoticeStore), and puts it
// back when the send fails, to try again later. A confirmation mail
// whose retries ran out has its token withdrawn, so that setting the
// address again mails a new one at once. Mail is best effort: a node that
// stops drops what it has not sent (a confirmation's token then stays
// issued, unmailed; setting the address again after
// api.ConfirmationEvery mails another).
package notice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/logkey"
	"github.com/heraldhooks/herald/internal/store"
)

// Kinds of notice, the metric's kind label.
const (
	KindFailing  = "failing"
	KindDisabled = "disabled"
	KindDead     = "dead"
	// KindConfirmation is the mail that asks an address to confirm it
	// (Confirmer); its results are sent or failed.
	KindConfirmation = "confirmation"
)

// Results of a notice, the metric's result label.
const (
	// ResultSent: the mail was accepted by the SMTP server.
	ResultSent = "sent"
	// ResultFailed: a send (or a database step before it) failed; it is
	// tried again later, up to the retries.
	ResultFailed = "failed"
	// ResultLimited: the endpoint was mailed about within the interval.
	ResultLimited = "limited"
	// ResultNoAddress: the consumer has no notice address.
	ResultNoAddress = "no_address"
	// ResultUnconfirmed: the consumer's address is not confirmed yet, so
	// nothing is mailed to it.
	ResultUnconfirmed = "unconfirmed"
	// ResultDropped: the queue was full, or the retries ran out.
	ResultDropped = "dropped"
)

// Kinds and Results list the label values of notices, for the metric.
var (
	Kinds   = []string{KindFailing, KindDisabled, KindDead}
	Results = []string{ResultSent, ResultFailed, ResultLimited, ResultNoAddress, ResultUnconfirmed, ResultDropped}
	// ConfirmationResults are the results of KindConfirmation.
	ConfirmationResults = []string{ResultSent, ResultFailed, ResultDropped}
)

// Store is what the mailer reads and writes.
type Store interface {
	NoticeAddressGet(ctx context.Context, consumerID string) (*store.NoticeAddress, error)
	NoticeReserve(ctx context.Context, p *store.NoticeReserveParams) (store.NoticeReservation, bool, error)
	NoticeRelease(ctx context.Context, p *store.NoticeReleaseParams) error
	NoticeAddressUnissue(ctx context.Context, p *store.NoticeAddressUnissueParams) error
	EndpointGet(ctx context.Context, id string) (*herald.Endpoint, error)
}

// Sender sends one message; SMTP is the real one.
type Sender interface {
	Send(ctx context.Context, m *Message) error
}

// Defaults of Config.
const (
	DefaultInterval  = time.Hour
	DefaultQueueSize = 256
	// sendTimeout bounds one send, connection included.
	sendTimeout = 30 * time.Second
)

// DefaultRetries are the waits before each new try of a failed send.
var DefaultRetries = []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, 30 * time.Minute}

// Config configures a Mailer.
type Config struct {
	Store  Store
	Sender Sender
	// Clock times retries and stamps notices; its StoreNow goes to the
	// store, so in production the database clock keeps the interval.
	Clock  clock.Clock
	Logger *slog.Logger
	// Interval is the least time between two mails about one endpoint
	// (default an hour).
	Interval time.Duration
	// QueueSize bounds the notices waiting to be sent, and those waiting
	// to be tried again (default 256 each).
	QueueSize int
	// Retries are the waits before each new try of a failed send (default
	// DefaultRetries); after the last, the notice is dropped.
	Retries []time.Duration
	// Counted, when set, counts each notice's result by kind (metrics).
	Counted func(kind, result string)
	// Confirmer, when set, composes and sends the confirmation mails
	// queued with QueueConfirmation; nil refuses them. Their results are
	// counted under KindConfirmation through Counted (give the Confirmer
	// no counter of its own).
	Confirmer *Confirmer
}

// Mailer queues notifications and mails them. Notify is safe for
// concurrent use; Run sends.
type Mailer struct {
	cfg   Config
	log   *slog.Logger
	queue chan item
	retry []item // Run's own
	// full is set by the first drop of a full queue and cleared when Run
	// takes from it again, so a spell of drops logs once (each is counted).
	full atomic.Bool
}

// item is one notice, or one confirmation mail, on its way.
type item struct {
	n    herald.Notification
	cf   *Confirmation // a confirmation mail, not a notice
	kind string
	at   time.Time // when it happened, on the node's clock
	try  int       // tries made
	due  time.Time // for a retry: when to try again
}

// New makes a Mailer; Run starts sending.
func New(cfg Config) *Mailer {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = DefaultQueueSize
	}
	if cfg.Retries == nil {
		cfg.Retries = DefaultRetries
	}
	return &Mailer{cfg: cfg, log: cfg.Logger, queue: make(chan item, cfg.QueueSize)}
}

// KindOf is the notice a notification is mailed as, or "" for one that
// is not mailed (herald.endpoint.recovered).
func KindOf(eventType string) string {
	switch eventType {
	case herald.NotifyEndpointFailing:
		return KindFailing
	case herald.NotifyEndpointDisabled:
		return KindDisabled
	case herald.NotifyDeliveryDead:
		return KindDead
	}
	return ""
}

// Notify queues n to be mailed, without waiting: with the queue full it
// is dropped and counted. It is the dispatcher's and the API's hook.
func (m *Mailer) Notify(n herald.Notification) {
	kind := KindOf(n.EventType)
	if kind == "" {
		return
	}
	select {
	case m.queue <- item{n: n, kind: kind, at: m.cfg.Clock.Now().UTC()}:
	default:
		m.count(kind, ResultDropped)
		if !m.full.Swap(true) {
			m.log.Warn("notice queue full: notices are dropped until it has room (herald_notices_sent_total{result=\"dropped\"} counts them)",
				logkey.ConsumerID, n.ConsumerID, "notice", kind)
		}
	}
}

// QueueConfirmation queues cf's mail without waiting, to be sent by Run
// and tried again on failure; false when it was not queued (the queue is
// full, or the mailer has no Confirmer), counted as dropped. It is the
// API's ConfirmationMailer: a PUT of an address answers at once.
func (m *Mailer) QueueConfirmation(cf Confirmation) bool {
	if m.cfg.Confirmer == nil {
		return false
	}
	select {
	case m.queue <- item{cf: &cf, kind: KindConfirmation, at: m.cfg.Clock.Now().UTC()}:
		return true
	default:
		m.count(KindConfirmation, ResultDropped)
		m.log.Warn("notice queue full: a confirmation mail was not queued", logkey.ConsumerID, cf.ConsumerID)
		return false
	}
}

// Run sends queued notices, and tries failed ones again when due, until
// ctx ends; then it returns nil, dropping what is left.
func (m *Mailer) Run(ctx context.Context) error {
	for {
		var wake <-chan time.Time
		var timer clock.Timer
		if due, ok := m.nextDue(); ok {
			timer = m.cfg.Clock.NewTimer(due.Sub(m.cfg.Clock.Now()))
			wake = timer.C()
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			if left := len(m.queue) + len(m.retry); left > 0 {
				m.log.Info("mailer stopped with notices unsent", logkey.Count, left)
			}
			return nil
		case it := <-m.queue:
			m.full.Store(false)
			m.handle(ctx, it)
		case <-wake:
			m.retryDue(ctx)
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// nextDue is when the earliest retry is due.
func (m *Mailer) nextDue() (time.Time, bool) {
	var due time.Time
	for _, it := range m.retry {
		if due.IsZero() || it.due.Before(due) {
			due = it.due
		}
	}
	return due, !due.IsZero()
}

// retryDue tries again every retry that is due.
func (m *Mailer) retryDue(ctx context.Context) {
	now := m.cfg.Clock.Now()
	var due []item
	kept := m.retry[:0]
	for _, it := range m.retry {
		if it.due.After(now) {
			kept = append(kept, it)
		} else {
			due = append(due, it)
		}
	}
	m.retry = kept
	for _, it := range due {
		m.handle(ctx, it)
	}
}

// handle makes one try of it: the consumer's address, the endpoint's
// interval, the mail. A failure is put back for later.
func (m *Mailer) handle(ctx context.Context, it item) {
	it.try++
	if it.cf != nil {
		m.handleConfirmation(ctx, it)
		return
	}
	log := m.log.With(logkey.ConsumerID, it.n.ConsumerID, "notice", it.kind)
	d, err := decode(it)
	if err != nil {
		log.Error("notice not mailed: unreadable notification", logkey.Error, err)
		m.count(it.kind, ResultDropped)
		return
	}
	log = log.With(logkey.EndpointID, d.EndpointID)
	cn, err := m.cfg.Store.NoticeAddressGet(ctx, it.n.ConsumerID)
	if err != nil {
		m.failed(ctx, it, log, fmt.Errorf("read notice address: %w", err))
		return
	}
	if cn.Email == "" {
		m.count(it.kind, ResultNoAddress)
		return
	}
	if !cn.Confirmed() {
		// Pending: whoever set the address may not own it, so nothing
		// goes there until its reader opened the confirmation link.
		m.count(it.kind, ResultUnconfirmed)
		log.Debug("notice not mailed: the address is not confirmed")
		return
	}
	if d.URL == "" {
		if ep, err := m.cfg.Store.EndpointGet(ctx, d.EndpointID); err == nil {
			d.URL = ep.URL
		} else if !errors.Is(err, store.ErrNotFound) {
			m.failed(ctx, it, log, fmt.Errorf("read endpoint: %w", err))
			return
		}
	}
	r, ok, err := m.cfg.Store.NoticeReserve(ctx, &store.NoticeReserveParams{
		EndpointID: d.EndpointID, Interval: m.cfg.Interval, Now: m.cfg.Clock.StoreNow(),
	})
	if err != nil {
		m.failed(ctx, it, log, fmt.Errorf("reserve notice: %w", err))
		return
	}
	if !ok {
		m.count(it.kind, ResultLimited)
		log.Debug("notice not mailed: the endpoint was mailed about within the interval")
		return
	}
	msg := compose(cn.Email, d)
	sendCtx, cancel := context.WithTimeout(ctx, sendTimeout)
	err = m.cfg.Sender.Send(sendCtx, msg)
	cancel()
	if err != nil {
		// Not sent: the next try, or another node's notice, may send.
		relCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		if rerr := m.cfg.Store.NoticeRelease(relCtx, &store.NoticeReleaseParams{Reservation: r}); rerr != nil {
			log.Warn("release notice", logkey.Error, rerr)
		}
		cancel()
		m.failed(ctx, it, log, fmt.Errorf("send mail: %w", err))
		return
	}
	m.count(it.kind, ResultSent)
	log.Info("notice mailed", "to", cn.Email)
}

// handleConfirmation makes one try of a confirmation mail: sent while
// the address it confirms is still the consumer's pending one (a change
// of address or a confirmation meanwhile makes the link useless, so
// nothing is sent), tried again on failure, and its token withdrawn when
// the retries run out.
func (m *Mailer) handleConfirmation(ctx context.Context, it item) {
	cf := *it.cf
	log := m.log.With(logkey.ConsumerID, cf.ConsumerID, "notice", it.kind)
	cn, err := m.cfg.Store.NoticeAddressGet(ctx, cf.ConsumerID)
	if err != nil {
		m.confirmationFailed(ctx, it, log, fmt.Errorf("read notice address: %w", err))
		return
	}
	if cn.Email != cf.Email || cn.Confirmed() {
		log.Debug("confirmation not mailed: the address changed or was confirmed meanwhile")
		return
	}
	if err := m.cfg.Confirmer.MailConfirmation(ctx, cf); err != nil {
		m.confirmationFailed(ctx, it, log, err)
		return
	}
	m.count(it.kind, ResultSent)
	log.Info("confirmation mailed", "to", cf.Email)
}

// confirmationFailed is failed for a confirmation mail: when it is
// dropped, its token is withdrawn too (unless a newer one replaced it), so
// that setting the address again mails a new link at once rather than
// ConfirmationEvery later.
func (m *Mailer) confirmationFailed(ctx context.Context, it item, log *slog.Logger, err error) {
	if ctx.Err() != nil {
		m.count(it.kind, ResultFailed)
		return // stopping
	}
	if it.try <= len(m.cfg.Retries) && len(m.retry) < m.cfg.QueueSize {
		wait := m.cfg.Retries[it.try-1]
		it.due = m.cfg.Clock.Now().Add(wait)
		m.retry = append(m.retry, it)
		log.Warn("confirmation not mailed; trying again later", logkey.Try, it.try, "retry_in", wait, logkey.Error, err)
		m.count(it.kind, ResultFailed)
		return
	}
	m.count(it.kind, ResultFailed)
	log.Error("confirmation not mailed; giving up", logkey.Try, it.try, logkey.Error, err)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if uerr := m.cfg.Store.NoticeAddressUnissue(wctx, &store.NoticeAddressUnissueParams{
		ConsumerID: it.cf.ConsumerID, TokenHash: it.cf.TokenHash,
	}); uerr != nil {
		log.Warn("withdraw confirmation", logkey.Error, uerr)
	}
	m.count(it.kind, ResultDropped)
}

// failed puts a failed try back for its next, or drops it when the
// retries ran out or too many wait, and counts it (after scheduling, so
// that whoever watches the count sees the retry already on the clock).
func (m *Mailer) failed(ctx context.Context, it item, log *slog.Logger, err error) {
	if ctx.Err() != nil {
		m.count(it.kind, ResultFailed)
		return // stopping
	}
	if it.try > len(m.cfg.Retries) || len(m.retry) >= m.cfg.QueueSize {
		log.Error("notice not mailed; giving up", logkey.Try, it.try, logkey.Error, err)
		m.count(it.kind, ResultFailed)
		m.count(it.kind, ResultDropped)
		return
	}
	wait := m.cfg.Retries[it.try-1]
	it.due = m.cfg.Clock.Now().Add(wait)
	m.retry = append(m.retry, it)
	log.Warn("notice not mailed; trying again later", logkey.Try, it.try, "retry_in", wait, logkey.Error, err)
	m.count(it.kind, ResultFailed)
}

func (m *Mailer) count(kind, result string) {
	if m.cfg.Counted != nil {
		m.cfg.Counted(kind, result)
	}
}

// details is what a mail tells, read from the notification's payload.
type details struct {
	Kind       string
	ConsumerID string
	EndpointID string
	URL        string
	At         time.Time // when it happened
	// Failing
	ConsecutiveFailures int
	FailingSince        time.Time
	// Disabled
	Reason string
	// Dead
	DeliveryID, EventID, EventType, DeadReason string
	AttemptCount                               int
	// Failing and dead
	LastStatusCode int
	LastError      string
}

// decode reads it's payload.
func decode(it item) (*details, error) {
	d := &details{Kind: it.kind, ConsumerID: it.n.ConsumerID, At: it.at}
	switch it.kind {
	case KindFailing:
		var p herald.EndpointFailingPayload
		if err := json.Unmarshal(it.n.Payload, &p); err != nil {
			return nil, err
		}
		d.EndpointID, d.URL, d.ConsecutiveFailures, d.FailingSince = p.EndpointID, p.URL, p.ConsecutiveFailures, p.FailingSince
		d.LastStatusCode, d.LastError = p.LastStatusCode, p.LastError
	case KindDisabled:
		var p herald.EndpointDisabledPayload
		if err := json.Unmarshal(it.n.Payload, &p); err != nil {
			return nil, err
		}
		d.EndpointID, d.URL, d.Reason = p.EndpointID, p.URL, p.Reason
		if !p.DisabledAt.IsZero() {
			d.At = p.DisabledAt
		}
	case KindDead:
		var p herald.DeliveryDeadPayload
		if err := json.Unmarshal(it.n.Payload, &p); err != nil {
			return nil, err
		}
		d.EndpointID, d.DeliveryID, d.EventID, d.EventType = p.EndpointID, p.DeliveryID, p.EventID, p.EventType
		d.DeadReason, d.AttemptCount, d.LastStatusCode, d.LastError = p.DeadReason, p.AttemptCount, p.LastStatusCode, p.LastError
	}
	if d.EndpointID == "" {
		return nil, errors.New("no endpoint_id in the payload")
	}
	return d, nil
}
