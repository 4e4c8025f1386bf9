package main

// Processes: a server in a session of its own, pinned, measured through
// /proc, stopped by its own PIDs.

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/m0serve/m0/bench/internal/procfs"
	linuxproc "github.com/m0serve/m0/internal/proc"
)

// A proc is a started server: the leader of a session (setsid), so every
// process it forks is found by its session id.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// startServer starts argv (pinned with taskset when cpus is not empty) in
// a new session, its output to logPath.
func startServer(argv, env []string, cpus, logPath string) (*proc, error) {
	if cpus != "" {
		argv = append([]string{"taskset", "-c", cpus}, argv...)
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGINT to the server's own process (its graceful path), then
// SIGTERM and SIGKILL to its whole session, and waits for every process of
// the session to be gone.
func (p *proc) stop() error {
	sid := p.pid()
	_ = p.cmd.Process.Signal(os.Interrupt)
	if waitSessionGone(sid, p.exited, 10*time.Second) {
		return nil
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		for _, pid := range procfs.Session(sid) {
			_ = syscall.Kill(pid, sig)
		}
		_ = syscall.Kill(-sid, sig)
		if waitSessionGone(sid, p.exited, 5*time.Second) {
			return fmt.Errorf("pid %d ignored SIGINT for 10 s; stopped with %v", sid, sig)
		}
	}
	return fmt.Errorf("session %d still has processes: %v", sid, procfs.Session(sid))
}

func waitSessionGone(sid int, exited <-chan struct{}, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			if len(procfs.Session(sid)) == 0 {
				return true
			}
		default:
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// sessionUsage is the CPU seconds (user + system, with what the processes
// reaped) and the RSS in KiB of every process of session sid.
func sessionUsage(sid int) (cpu float64, rssKiB int64) { return procfs.Usage(procfs.Session(sid)) }

// running are the servers up, stopped by the harness's signal handler if
// it is interrupted.
var running struct {
	sync.Mutex
	procs map[*proc]bool
}

func track(p *proc) {
	running.Lock()
	defer running.Unlock()
	if running.procs == nil {
		running.procs = map[*proc]bool{}
	}
	running.procs[p] = true
}

func untrack(p *proc) {
	running.Lock()
	defer running.Unlock()
	delete(running.procs, p)
}

// stopRunning stops every server up.
func stopRunning() {
	running.Lock()
	procs := make([]*proc, 0, len(running.procs))
	for p := range running.procs {
		procs = append(procs, p)
	}
	running.Unlock()
	for _, p := range procs {
		p.stop()
	}
}

// rssSampler records the highest RSS of a set of processes until stopped.
type rssSampler struct {
	done chan struct{}
	peak chan int64
}

func sampleRSS(pids []int, every time.Duration) *rssSampler {
	s := &rssSampler{done: make(chan struct{}), peak: make(chan int64, 1)}
	go func() {
		var peak int64
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if _, rss := procfs.Usage(pids); rss > peak {
				peak = rss
			}
			select {
			case <-s.done:
				s.peak <- peak
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *rssSampler) stop() int64 {
	close(s.done)
	return <-s.peak
}

// cpuBusy is how busy each listed CPU was over d, in percent.
func cpuBusy(cpus []int, d time.Duration) []float64 {
	read := func() map[string]linuxproc.CPUTimes {
		b, _ := os.ReadFile("/proc/stat")
		return linuxproc.CPUStat(b)
	}
	a := read()
	time.Sleep(d)
	b := read()
	out := make([]float64, len(cpus))
	for i, c := range cpus {
		k := "cpu" + strconv.Itoa(c)
		if dt := b[k].Total - a[k].Total; dt > 0 {
			out[i] = 100 * (1 - float64(b[k].Idle-a[k].Idle)/float64(dt))
		}
	}
	return out
}
