package host

import (
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// threadNice gives the calling thread, locked to its goroutine, the nice
// level.
func threadNice(nice int) error { return unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), nice) }

// newIdleClock reads the CPUs the process's affinity allows, once.
func newIdleClock() *idleClock {
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) != nil {
		return nil
	}
	c := &idleClock{cpus: map[string]bool{}}
	for i := range len(set) * 64 {
		if set.IsSet(i) {
			c.cpus["cpu"+strconv.Itoa(i)] = true
		}
	}
	return c
}

// cpuLimit is the CPUs the process's cgroup may use, unrounded (cgroup v2's
// cpu.max, or v1's cfs quota over its period); 0 for none, or where it
// cannot be read. The runtime's P count rounds it up, to two at least.
func cpuLimit() float64 {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0
	}
	for line := range bytes.Lines(b) {
		// v2: "0::/path"; v1: "N:cpu,cpuacct:/path"
		parts := bytes.SplitN(bytes.TrimSpace(line), []byte(":"), 3)
		if len(parts) != 3 {
			continue
		}
		path := string(parts[2])
		if len(parts[1]) == 0 {
			if q := quotaOf("/sys/fs/cgroup"+path+"/cpu.max", ""); q > 0 {
				return q
			}
			continue
		}
		for _, ctl := range bytes.Split(parts[1], []byte(",")) {
			if string(ctl) == "cpu" {
				dir := "/sys/fs/cgroup/" + string(parts[1]) + path
				if q := quotaOf(dir+"/cpu.cfs_quota_us", dir+"/cpu.cfs_period_us"); q > 0 {
					return q
				}
			}
		}
	}
	return 0
}

// quotaOf reads a CPU limit: cgroup v2's "QUOTA PERIOD" in one file (no
// period file), or v1's quota and period in two. 0 for none ("max", -1).
func quotaOf(file, periodFile string) float64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	f := bytes.Fields(b)
	if periodFile != "" {
		p, err := os.ReadFile(periodFile)
		if err != nil || len(f) != 1 {
			return 0
		}
		f = append(f, bytes.TrimSpace(p))
	}
	if len(f) != 2 {
		return 0
	}
	q, err1 := strconv.ParseFloat(string(f[0]), 64)
	p, err2 := strconv.ParseFloat(string(f[1]), 64)
	if err1 != nil || err2 != nil || q <= 0 || p <= 0 {
		return 0 // "max", or v1's -1
	}
	return q / p
}
