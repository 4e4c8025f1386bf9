// Package procfs is what the benchmark tools read of processes on Linux:
// CPU time and resident memory from /proc, the processes of a session or
// of a parent, and a free port to start a server on.
package procfs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/m0serve/m0/internal/proc"
	"github.com/m0serve/m0/internal/testutil"
)

// ClockTicks is sysconf(_SC_CLK_TCK), 100 on Linux.
const ClockTicks = proc.UserHZ

// Stat is /proc/PID/stat after the command name: Stat(pid)[0] is the state,
// field 3 of proc(5), so field N of proc(5) is [N-3].
func Stat(pid int) ([]string, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, errors.New("procfs: malformed stat of " + strconv.Itoa(pid))
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 22 {
		return nil, errors.New("procfs: short stat of " + strconv.Itoa(pid))
	}
	return f, nil
}

// Ticks is a process's user and system time in clock ticks; with reaped,
// with the time of the children it has waited for too.
func Ticks(pid int, reaped bool) int64 {
	f, err := Stat(pid)
	if err != nil {
		return 0
	}
	idx := []int{11, 12} // utime stime
	if reaped {
		idx = append(idx, 13, 14) // cutime cstime
	}
	var sum int64
	for _, i := range idx {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		sum += v
	}
	return sum
}

// RSS is a process's resident set in KiB.
func RSS(pid int) (int64, error) {
	f, err := Stat(pid)
	if err != nil {
		return 0, err
	}
	pages, err := strconv.ParseInt(f[21], 10, 64)
	return pages * int64(os.Getpagesize()) / 1024, err
}

// Matching are the live (not zombie) processes whose stat satisfies keep.
func Matching(keep func(stat []string) bool) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f, err := Stat(pid); err == nil && f[0] != "Z" && keep(f) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Session are the live processes of session sid.
func Session(sid int) []int {
	s := strconv.Itoa(sid)
	return Matching(func(f []string) bool { return f[3] == s }) // field 6: session
}

// Children are the live processes whose parent is ppid.
func Children(ppid int) []int {
	p := strconv.Itoa(ppid)
	return Matching(func(f []string) bool { return f[1] == p }) // field 4: ppid
}

// Usage is the CPU seconds (with what they reaped) and the RSS in KiB of
// the processes, summed.
func Usage(pids []int) (cpuSeconds float64, rssKiB int64) {
	for _, pid := range pids {
		cpuSeconds += float64(Ticks(pid, true)) / ClockTicks
		if r, err := RSS(pid); err == nil {
			rssKiB += r
		}
	}
	return cpuSeconds, rssKiB
}

// FreePort is a TCP port on 127.0.0.1 nothing is bound to now, below the
// kernel's ephemeral range (testutil.FreePort).
func FreePort() (int, error) { return testutil.FreePort() }
