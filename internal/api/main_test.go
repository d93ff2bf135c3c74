package api_test

import (
	"testing"

	"github.com/heraldhooks/herald/internal/store/pgstore/pgtest"
)

// TestMain drops the pooled PostgreSQL schemas the tests leave behind.
func TestMain(m *testing.M) { pgtest.Main(m) }
