package dispatch_test

import (
	"testing"

	"github.com/heraldhooks/herald/internal/store/pgstore/pgtest"
)

// TestMain drops the PostgreSQL schemas the tests on PostgreSQL leave
// (pgtest).
func TestMain(m *testing.M) { pgtest.Main(m) }
