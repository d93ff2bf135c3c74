package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat. Linux fixes it
// at 100 for every program on every architecture it runs on today,
// whatever the kernel's own tick rate.
const userHZ = 100

// procCPU returns the CPU time (user and system) the process pid has used,
// read from /proc/<pid>/stat; pid "self" is this process. It fails where
// there is no /proc (not Linux).
func procCPU(pid string) (time.Duration, error) {
	raw, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, fmt.Errorf("read CPU time: %w", err)
	}
	return parseStatCPU(raw)
}

// parseStatCPU reads utime and stime, fields 14 and 15 of a
// /proc/<pid>/stat line. The command name, field 2, is in parentheses and
// may hold spaces and parentheses itself, so fields are counted from the
// last ')'.
func parseStatCPU(raw []byte) (time.Duration, error) {
	end := bytes.LastIndexByte(raw, ')')
	if end < 0 {
		return 0, fmt.Errorf("read CPU time: no command name in %q", truncate(string(raw), 80))
	}
	// After ')' come field 3 (state) onwards.
	fields := strings.Fields(string(raw[end+1:]))
	const utime, stime = 14 - 3, 15 - 3
	if len(fields) <= stime {
		return 0, fmt.Errorf("read CPU time: %d fields after the command name, want more than %d", len(fields), stime)
	}
	var ticks int64
	for _, i := range []int{utime, stime} {
		n, err := strconv.ParseInt(fields[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("read CPU time: field %d: %w", i+3, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// truncate cuts s to n characters and marks the cut.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
