package api_test

import (
	"os"
	"testing"

	"github.com/heraldhooks/herald/internal/store/pgstore/pgtest"
)

// TestMain drops the pooled PostgreSQL schemas the tests leave behind.
func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Close()
	os.Exit(code)
}
