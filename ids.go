package herald

import (
	"crypto/rand"
	"encoding/binary"
	"strings"
	"time"
)

// Id prefixes, one per noun (API.md, Conventions).
const (
	PrefixEndpoint = "ep_"
	PrefixEvent    = "evt_"
	PrefixDelivery = "dlv_"
	PrefixAttempt  = "att_"
)

// crockford is the Crockford base32 alphabet: sortable, no I, L, O or U.
const crockford = "0123456789abcdefghjkmnpqrstvwxyz"

// NewID returns prefix followed by 26 characters: 48 bits of milliseconds
// since the Unix epoch, then 80 random bits. Ids of one noun sort by creation
// time (to the millisecond), which gives lists a stable order and cursors a
// cheap key.
func NewID(prefix string, now time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(now.UnixMilli())<<16)
	// The top 48 bits hold the time; the remaining 80 bits are random.
	if _, err := rand.Read(b[6:]); err != nil {
		panic("herald: crypto/rand failed: " + err.Error())
	}
	return encodeID(prefix, b)
}

// FirstID is the smallest id of a noun made at t's millisecond: every id
// NewID made before that millisecond sorts below it, and every id made in
// it or after does not. A walk of ids by time stops at it.
func FirstID(prefix string, t time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(t.UnixMilli())<<16)
	return encodeID(prefix, b)
}

// encodeID is prefix and the 128 bits of b as 26 Crockford digits.
func encodeID(prefix string, b [16]byte) string {
	hi := binary.BigEndian.Uint64(b[:8])
	lo := binary.BigEndian.Uint64(b[8:])
	var out [26]byte
	// 128 bits as 26 base32 digits: the first digit holds the top 3 bits.
	for i := 25; i >= 0; i-- {
		out[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	var sb strings.Builder
	sb.Grow(len(prefix) + 26)
	sb.WriteString(prefix)
	sb.Write(out[:])
	return sb.String()
}
