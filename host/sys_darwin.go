package host

// threadNice: a quality-of-service class needs no privilege on macOS.
func threadNice(nice int) error { return nil }

func init() {
	// A worker's resident memory is read from /proc/PID/statm, which
	// macOS does not have.
	pending["workers-max-rss"] = "a worker's resident memory, read from Linux's /proc"
}
