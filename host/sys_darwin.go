package host

// threadNice: a quality-of-service class needs no privilege on macOS.
func threadNice(nice int) error { return nil }

// newIdleClock: macOS has no /proc/stat; the idle CPUs are then the P
// count less what the process uses.
func newIdleClock() *idleClock { return nil }

// cpuLimit: macOS has no cgroups.
func cpuLimit() float64 { return 0 }

func init() {
	// A worker's resident memory is read from /proc/PID/statm, which
	// macOS does not have.
	pending["workers-max-rss"] = "a worker's resident memory, read from Linux's /proc"
}
