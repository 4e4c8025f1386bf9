package host

import "golang.org/x/sys/unix"

// threadNice gives the calling thread, locked to its goroutine, the nice
// level.
func threadNice(nice int) error { return unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), nice) }
