package storetest

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store"
)

// PayloadsDB is a database that stores opened with and without
// compressed payloads share (store.WithCompressedPayloads).
type PayloadsDB interface {
	// Open opens the database, compressing the payloads it writes if
	// compress is set, and migrates it. The store is closed when t ends.
	Open(t *testing.T, compress bool) store.Store
	// Stored is event id's payload as its row holds it.
	Stored(t *testing.T, id string) []byte
}

// NewPayloadsDB is the PayloadsDB of a backend's database that open opens
// and stored reads a payload's column from.
func NewPayloadsDB[S store.Store](open func(ctx context.Context, opts ...store.OpenOption) (S, error), stored func(t *testing.T, id string) []byte) PayloadsDB {
	return payloadsDB[S]{open: open, stored: stored}
}

type payloadsDB[S store.Store] struct {
	open   func(ctx context.Context, opts ...store.OpenOption) (S, error)
	stored func(t *testing.T, id string) []byte
}

func (d payloadsDB[S]) Open(t *testing.T, compress bool) store.Store {
	var opts []store.OpenOption // secrets plain: the stores share no key
	if compress {
		opts = append(opts, store.WithCompressedPayloads())
	}
	return OpenSecrets(t, nil, func(ctx context.Context, _ ...store.OpenOption) (S, error) {
		return d.open(ctx, opts...)
	})
}

func (d payloadsDB[S]) Stored(t *testing.T, id string) []byte { return d.stored(t, id) }

// RunPayloads runs the cases of compressed payloads against a backend.
// fresh must give a new, empty database each time.
func RunPayloads(t *testing.T, fresh func(t *testing.T) PayloadsDB) {
	t.Run("CompressedPayloadsReadBackByteForByte", func(t *testing.T) {
		t.Parallel()
		testCompressedPayloads(t, fresh(t))
	})
}

// orderPayload is an order event of about 1 KiB in JSON as a shop would
// send it: repeated keys, a few numbers and words, n in its ids.
func orderPayload(n int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"id":"ord_%08d","object":"order","status":"paid","currency":"eur","customer":{"id":"cus_%06d","email":"customer%d@example.com","name":"Customer %d"},"items":[`, n, n*7, n, n)
	for i := range 6 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"sku":"SKU-%05d","name":"Item number %d of order %d","quantity":%d,"unit_amount":%d,"tax_rate":"0.2%d"}`, n*13+i, i, n, i+1, 1000+i*250, i)
	}
	fmt.Fprintf(&b, `],"shipping":{"address":{"line1":"%d Rue de la Paix","city":"Paris","postal_code":"750%02d","country":"FR"}},"created":%d}`, n%200, n%20, 1700000000+n)
	return []byte(b.String())
}

// testCompressedPayloads: a store that compresses writes a payload of a
// kilobyte smaller, and one too small to gain as it is; a store that does
// not writes payloads as they are. Each store reads every payload back
// byte for byte, through a read, a list and a claim.
func testCompressedPayloads(t *testing.T, db PayloadsDB) {
	ctx := t.Context()
	zs, ps := db.Open(t, true), db.Open(t, false)
	createEndpoint(t, zs, newEndpoint("c1"), at(0))
	big, small, plain := orderPayload(1), []byte(`{"n":1}`), orderPayload(2)
	require.Greater(t, len(big), 900)
	res := ingest(t, zs, at(0),
		store.EventIngestItem{ConsumerID: "c1", EventType: "order.paid", Payload: big},
		store.EventIngestItem{ConsumerID: "c1", EventType: "order.paid", Payload: small})
	res = append(res, ingest(t, ps, at(0),
		store.EventIngestItem{ConsumerID: "c1", EventType: "order.paid", Payload: plain})...)
	want := map[string][]byte{res[0].Event.ID: big, res[1].Event.ID: small, res[2].Event.ID: plain}
	for _, r := range res {
		require.Equal(t, want[r.Event.ID], []byte(r.Event.Payload), "the ingest's answer")
	}

	stored := db.Stored(t, res[0].Event.ID)
	require.False(t, bytes.Equal(stored, big), "compressed")
	require.Less(t, len(stored), len(big)/2, "a kilobyte of JSON takes less than half")
	require.Equal(t, small, db.Stored(t, res[1].Event.ID), "too small to gain: as it is")
	require.Equal(t, plain, db.Stored(t, res[2].Event.ID), "a store that does not compress")

	for _, s := range []store.Store{zs, ps} {
		for id, p := range want {
			ev, err := s.EventGet(ctx, id)
			require.NoError(t, err)
			require.Equal(t, p, []byte(ev.Payload), "read %s", id)
		}
		page, err := s.EventList(ctx, &store.EventListParams{ConsumerID: "c1", Limit: 10})
		require.NoError(t, err)
		require.Len(t, page.Items, 3)
		for _, ev := range page.Items {
			require.Equal(t, want[ev.ID], []byte(ev.Payload), "listed %s", ev.ID)
		}
	}
	claimed := claim(t, ps, at(0), 10)
	require.Len(t, claimed, 3)
	for _, c := range claimed {
		require.Equal(t, want[c.Event.ID], []byte(c.Event.Payload), "claimed %s", c.Event.ID)
	}
}
