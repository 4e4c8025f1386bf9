//go:build !linux

package cpython

import "time"

// threadClock reports no clock: a thread's CPU time is read on Linux only.
func threadClock() (int32, bool) { return 0, false }

func clockTime(int32) time.Duration { return 0 }
