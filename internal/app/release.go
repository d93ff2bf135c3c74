package app

import "github.com/heraldhooks/herald/internal/store"

// The stores record this release beside each migration they apply and
// name it when a database's schema is newer than it knows.
func init() { store.Release = Version }
