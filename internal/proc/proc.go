// Package proc reads what Linux's /proc says of processes (a process's
// children, and whether one was started by a SIGUSR2 re-exec; nothing on
// macOS, which has no /proc), and makes the anonymous files processes
// share.
package proc

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// UpgradeMark is the variable tableflip puts in the environment of the
// process a re-exec starts (its "has a parent" sentinel): the mark by
// which a re-exec's successor is told from any other child.
const UpgradeMark = "TABLEFLIP_HAS_PARENT_7DIU3"

// Children returns the pids of pid's children now (every thread's).
func Children(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// Upgraded reports whether pid was started by a re-exec: its environment,
// as it was started, carries UpgradeMark.
func Upgraded(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return false
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if bytes.HasPrefix(kv, []byte(UpgradeMark+"=")) {
			return true
		}
	}
	return false
}
