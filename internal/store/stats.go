package store

import "github.com/heraldhooks/herald"

// NewStats is the Stats a backend fills: every status present in
// ByStatus, at zero until counted.
func NewStats() *Stats {
	return &Stats{ByStatus: map[herald.Status]int64{
		herald.StatusPending:    0,
		herald.StatusDelivering: 0,
		herald.StatusDelivered:  0,
		herald.StatusDead:       0,
		herald.StatusCancelled:  0,
	}}
}
