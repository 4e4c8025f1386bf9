package host

import (
	"fmt"
	"runtime"

	"github.com/m0serve/m0/internal/boot"
)

// qosClass is what a --qos class means on Linux: a nice level for the
// Python threads, and SCHED_BATCH for the classes that yield to others.
type qosClass struct {
	nice  int
	batch bool
}

// qosLinux maps the classes, named as the platform's quality-of-service
// classes are, to Linux scheduling.
var qosLinux = map[string]qosClass{
	"user-interactive": {nice: -10},
	"user-initiated":   {nice: -5},
	"default":          {nice: 0},
	"utility":          {nice: 5, batch: true},
	"background":       {nice: 10, batch: true},
}

// qosPermitted reports whether this process may take the class. A nice
// level below 0 needs CAP_SYS_NICE or an RLIMIT_NICE that allows it, which
// root inside a container may not have: it is tried on a thread made for
// the purpose and thrown away. (On macOS every class is the process's to
// take, and the nice level stands for the class: see m0_apply_qos.)
func qosPermitted(class string) bool {
	q := qosLinux[class]
	if q.nice >= 0 {
		return true
	}
	ok := make(chan bool)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		ok <- threadNice(q.nice) == nil
	}()
	return <-ok
}

// applyQoS gives the Python threads the scheduling class of c.QoS; the
// default class changes nothing.
func applyQoS(c *Config) error {
	if c.QoS == "" || c.QoS == "default" {
		return nil
	}
	q := qosLinux[c.QoS]
	rt, err := boot.Python()
	if err != nil {
		return err
	}
	if err := rt.SetQoS(q.nice, q.batch); err != nil {
		return &refusal{Found: fmt.Sprintf("--qos %s: %v", c.QoS, err), Fix: "run with CAP_SYS_NICE, or pass --qos default"}
	}
	return nil
}
