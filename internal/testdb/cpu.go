package testdb

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"
)

// PostgresCPU is the CPU time, user and system, of the PostgreSQL server
// running on this machine: every process named postgres, and the
// backends that have exited (counted in the postmaster's children's
// times). ok is false where it cannot be read (no /proc, or the server
// runs elsewhere). Benchmarks take the difference over their loop.
func PostgresCPU() (cpu time.Duration, ok bool) {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	var ticks int64
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		comm, err := os.ReadFile("/proc/" + d.Name() + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != "postgres" {
			continue
		}
		raw, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		// Fields from the state (field 3) on, after the command name.
		f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
		if len(f) < 13 {
			continue
		}
		n := 2 // utime and stime
		if f[1] == "1" {
			n = 4 // the postmaster: its reaped children too
		}
		for _, s := range f[11 : 11+n] {
			v, _ := strconv.ParseInt(s, 10, 64)
			ticks += v
		}
		ok = true
	}
	// /proc counts in USER_HZ, 100 on every Linux of today.
	return time.Duration(ticks) * time.Second / 100, ok
}
