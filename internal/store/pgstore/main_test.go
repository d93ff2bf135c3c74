package pgstore

import (
	"flag"
	"os"
	"testing"
)

// parallel is how many of this package's tests run at once unless
// -parallel says otherwise. They wait on the PostgreSQL server, not on this
// process: each makes a schema and applies every migration, a commit each,
// and a test of nodes waits on their locks. go test's default, GOMAXPROCS,
// leaves a two-core machine idle for most of the run (66 s at 2, 35 s at
// 6 there, the server's connections peaking near 35).
const parallel = "6"

func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", parallel); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
