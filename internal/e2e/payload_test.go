package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/verify"
)

// TestCompressedPayloadsArriveAsSent: with --compress-payloads a node
// stores a kilobyte of JSON compressed, and the receiver still gets the
// payload byte for byte (its spacing and key order as sent), signed over
// those bytes; the API reads it back the same.
func TestCompressedPayloadsArriveAsSent(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, db string) {
		e := setup(t, db, func(o *options) { o.compressPayloads = true })
		rc := newReceiver(t, e.clock, nil)
		ep := e.createEndpoint(map[string]any{"consumer_id": "cust_z", "url": rc.URL + "/hook"})
		var items []string
		for i := range 14 {
			items = append(items, fmt.Sprintf(`{ "sku" : "SKU-%04d",  "quantity":%d , "note":"leave at the door" }`, i, i+1))
		}
		payload := `{"z":1,  "a" : [` + strings.Join(items, ",\n ") + `] }`
		require.Greater(t, len(payload), 900)
		ev := e.send("cust_z", "order.paid", payload)

		rc.waitHits(t, 1)
		got := rc.all()[0]
		require.Equal(t, payload, string(got.Body))
		require.NoError(t, verify.VerifyStandard(ep.Secret, got.Headers, got.Body, start, time.Minute))
		var read struct {
			Payload jsonRaw `json:"payload"`
		}
		e.must(http.StatusOK, "GET", "/v1/events/"+ev.ID, nil, &read)
		require.Equal(t, payload, string(read.Payload))
	})
}

// jsonRaw keeps a JSON value's bytes as they came.
type jsonRaw []byte

func (r *jsonRaw) UnmarshalJSON(b []byte) error { *r = append((*r)[:0], b...); return nil }
