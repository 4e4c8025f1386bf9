// Package pid1 makes the server a correct first process of a container:
// signals passed on, orphans reaped, the exit code kept.
package pid1

import (
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/m0serve/m0/internal/boot"
	"github.com/m0serve/m0/internal/proc"
	"golang.org/x/sys/unix"
)

// initChildEnv marks the server process an init started.
const initChildEnv = "M0_INIT_CHILD"

// forwarded are the signals an init passes on to the server.
var forwarded = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTTIN, syscall.SIGTTOU}

// early holds the signals an init gets before RunAsInit runs: as PID 1 a
// signal with no handler is dropped by the kernel, so they are caught from
// the start of the program.
var early chan os.Signal

func init() {
	if os.Getpid() == 1 && os.Getenv(initChildEnv) == "" {
		early = make(chan os.Signal, 8)
		signal.Notify(early, append(forwarded, syscall.SIGCHLD)...)
	}
}

// RunAsInit makes the process a minimal init when it is PID 1 (the first
// process of a container): it starts itself again as its only child,
// passes on the signals it gets, reaps every process that ends up its
// child (an application's orphaned grandchildren included), and exits as
// its child did. It returns ok false, doing nothing, in any other process;
// the caller then goes on to serve.
func RunAsInit() (code int, ok bool) {
	if os.Getpid() != 1 || os.Getenv(initChildEnv) != "" {
		return 0, false
	}
	exe, err := os.Executable()
	if err != nil {
		return boot.Report(os.Stderr, &boot.StartupError{Msg: "as PID 1, cannot find the executable: " + err.Error()}), true
	}
	sigs := early
	cmd := exec.Command(exe, os.Args[1:]...)
	cmd.Env = append(os.Environ(), initChildEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return boot.Report(os.Stderr, &boot.StartupError{Msg: "as PID 1, cannot start the server: " + err.Error()}), true
	}
	child := cmd.Process.Pid
	// A signal that came before the child: it gets it now.
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			unix.Kill(child, sig.(syscall.Signal))
			continue
		}
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
			if pid == child {
				switch {
				case ws.Exited() && ws.ExitStatus() == 0 && successor() > 0:
					// The server handed its listeners to a successor
					// (SIGUSR2), an orphan of this init now: it is the
					// server from here on.
					child = successor()
				case ws.Exited():
					return ws.ExitStatus(), true
				case ws.Signaled():
					return 128 + int(ws.Signal()), true
				}
			}
		}
	}
	return boot.ExitStartup, true
}

// successor is the child of this init that a server's re-exec started,
// or 0.
func successor() int {
	for _, pid := range proc.Children(os.Getpid()) {
		if proc.Upgraded(pid) {
			return pid
		}
	}
	return 0
}
