package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/m0serve/m0/bench/internal/procfs"
)

// server is one m0serve process under test, in a process group of its
// own, its output in files of the run's directory.
type server struct {
	cmd     *exec.Cmd
	argv    []string
	port    int
	dir     string
	stdout  string // paths
	stderr  string
	exited  chan struct{}
	waitErr error
}

// serverSpec is what to start.
type serverSpec struct {
	python  *python
	appDir  string
	spec    string
	args    []string // flags before the spec
	env     []string // added to the environment
	nofile  int      // prlimit --nofile=N:N when above zero
	banners int      // ready lines to wait for (one per worker); 0 is 1
}

// python is one CPython and its virtualenv.
type python struct {
	version string // 3.11.7
	venv    string // /work/main/.venv/py3.11
}

func (p *python) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "PATH", "VIRTUAL_ENV", "M0_PYTHON_LIBRARY", "MOJO_PYTHON_LIBRARY", "PYTHONHOME":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PATH="+filepath.Join(p.venv, "bin")+":"+os.Getenv("PATH"), "VIRTUAL_ENV="+p.venv,
		"PYTHONDONTWRITEBYTECODE=1")
}

// pythons finds the virtualenvs .venv/py3.X under root for the minors
// named (3.10,3.11,...), with the version each runs.
func pythons(root, minors string) ([]*python, error) {
	var out []*python
	for _, m := range strings.Split(minors, ",") {
		venv := filepath.Join(root, ".venv", "py"+m)
		b, err := exec.Command(filepath.Join(venv, "bin", "python"), "-c",
			"import platform; print(platform.python_version())").Output()
		if err != nil {
			return nil, fmt.Errorf("python %s: %s/bin/python: %v (make the venvs: scripts/test)", m, venv, err)
		}
		out = append(out, &python{version: strings.TrimSpace(string(b)), venv: venv})
	}
	return out, nil
}

// startServer starts m0serve as s says and waits for its ready lines.
func startServer(bin, workdir string, s serverSpec) (*server, error) {
	port, err := procfs.FreePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(workdir, "server-")
	if err != nil {
		return nil, err
	}
	argv := []string{bin, "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--app-dir", s.appDir}
	argv = append(append(argv, s.args...), s.spec)
	if s.nofile > 0 {
		n := strconv.Itoa(s.nofile)
		argv = append([]string{"prlimit", "--nofile=" + n + ":" + n}, argv...)
	}
	srv := &server{argv: argv, port: port, dir: dir, exited: make(chan struct{}),
		stdout: filepath.Join(dir, "stdout.log"), stderr: filepath.Join(dir, "stderr.log")}
	out, err := os.Create(srv.stdout)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	errf, err := os.Create(srv.stderr)
	if err != nil {
		return nil, err
	}
	defer errf.Close()
	srv.cmd = exec.Command(argv[0], argv[1:]...)
	srv.cmd.Stdout, srv.cmd.Stderr, srv.cmd.Dir = out, errf, dir
	srv.cmd.Env = append(s.python.env(), s.env...)
	srv.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := srv.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		srv.waitErr = srv.cmd.Wait()
		close(srv.exited)
	}()
	want := max(s.banners, 1)
	deadline := time.Now().Add(30 * time.Second)
	for srv.count("🔥 m0serve:", srv.stdout) < want {
		select {
		case <-srv.exited:
			return nil, fmt.Errorf("m0serve exited (%v) before its ready line:\n%s", srv.waitErr, srv.tail())
		default:
		}
		if time.Now().After(deadline) {
			srv.kill()
			return nil, fmt.Errorf("m0serve not ready after 30 s:\n%s", srv.tail())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return srv, nil
}

func (s *server) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }
func (s *server) pid() int     { return s.cmd.Process.Pid }

// command is the command line, as a shell would take it.
func (s *server) command() string { return strings.Join(s.argv, " ") }

// count is the number of lines of the file at path holding text.
func (s *server) count(text, path string) int {
	b, _ := os.ReadFile(path)
	return bytes.Count(b, []byte(text))
}

// lines is the lines of stderr holding text.
func (s *server) lines(text string) []string {
	b, _ := os.ReadFile(s.stderr)
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), text) {
			out = append(out, sc.Text())
		}
	}
	return out
}

func (s *server) tail() string {
	o, _ := os.ReadFile(s.stdout)
	e, _ := os.ReadFile(s.stderr)
	if len(e) > 4000 {
		e = e[len(e)-4000:]
	}
	return fmt.Sprintf("--- stdout\n%s--- stderr\n%s", o, e)
}

// stop sends SIGTERM and waits for the exit; it returns the exit code.
func (s *server) stop() (int, error) {
	s.cmd.Process.Signal(syscall.SIGTERM)
	return s.wait(20 * time.Second)
}

// wait waits up to d for the process to exit, then kills its group.
func (s *server) wait(d time.Duration) (int, error) {
	select {
	case <-s.exited:
	case <-time.After(d):
		s.kill()
		return -1, fmt.Errorf("m0serve still running %v after SIGTERM; killed", d)
	}
	var ee *exec.ExitError
	if errors.As(s.waitErr, &ee) {
		return ee.ExitCode(), nil
	}
	return 0, s.waitErr
}

func (s *server) kill() {
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.exited
}

// tree is pid and its descendants, read from /proc.
func tree(pid int) []int {
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", out[i]))
		for _, t := range tasks {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", out[i], t.Name()))
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil {
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// rssKiB is VmRSS of pid and its descendants, in KiB.
func rssKiB(pid int) int64 {
	var total int64
	for _, p := range tree(pid) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				f := strings.Fields(rest)
				if len(f) > 0 {
					n, _ := strconv.ParseInt(f[0], 10, 64)
					total += n
				}
			}
		}
	}
	return total
}

// cpuTicks is utime+stime of pid and its descendants, in clock ticks
// (USER_HZ, 100 a second on Linux).
func cpuTicks(pid int) int64 {
	var total int64
	for _, p := range tree(pid) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 12 {
			u, _ := strconv.ParseInt(f[11], 10, 64)
			st, _ := strconv.ParseInt(f[12], 10, 64)
			total += u + st
		}
	}
	return total
}

// sampler reads the server's RSS every second until stopped.
type sampler struct {
	pid     int
	mu      sync.Mutex
	samples []int64
	maxKiB  int64
	stopped chan struct{}
	done    chan struct{}
}

func sample(pid int) *sampler {
	s := &sampler{pid: pid, stopped: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			s.take()
			select {
			case <-t.C:
			case <-s.stopped:
				return
			}
		}
	}()
	return s
}

// take samples now and returns the sample.
func (s *sampler) take() int64 {
	r := rssKiB(s.pid)
	s.mu.Lock()
	s.samples = append(s.samples, r)
	s.maxKiB = max(s.maxKiB, r)
	s.mu.Unlock()
	return r
}

// resetMax starts the maximum over from now.
func (s *sampler) resetMax() {
	s.mu.Lock()
	s.maxKiB = 0
	s.mu.Unlock()
}

func (s *sampler) max() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxKiB
}

func (s *sampler) stop() {
	close(s.stopped)
	<-s.done
}
