package main

// The harness: what a run needs on the machine, and one suite measured.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
	"github.com/m0serve/m0/bench/internal/procfs"
)

const (
	// centrifugoVersion is built with go install into bench/.bin.
	centrifugoVersion = "6.9.1"
	readyTimeout      = 30 * time.Second
	busyLimit         = 10.0 // % of a benchmark CPU busy, idle, above which a run is noted as noisy
)

type options struct {
	quick    bool
	duration time.Duration
	warmup   time.Duration
	timeout  time.Duration
	only     []string
	results  string // the results root: bench/results
	venv     string
	docs     string // the page rendered; "" for none
	rounds   int    // loads per server and concurrency: interleaved rounds, or loads in a row; the median is reported
	concs    []int  // the concurrencies measured, in place of each suite's (none: the suite's)
	mojoVenv string // the Mojo m0serve's virtualenv (bench/.venv-mojo)
}

// The free-threaded suite's virtualenvs: one on the free-threaded CPython
// scripts/freethreaded builds, one on a GIL build of the same minor version.
const (
	ftVenv  = ".venv-3.13t"
	gilVenv = ".venv-3.13"
)

type harness struct {
	opt       options
	repo      string // the checkout
	bench     string // repo/bench
	bin       string // bench/.bin
	work      string // a temporary directory, removed at the end
	static    string // the static suite's files
	djangoDB  string
	date      string
	outDir    string // results/DATE
	raw       string // outDir/raw: server logs (not committed)
	versions  map[string]string
	commit    string
	machine   Machine
	failures  []string // quick: what was not correct
	nginxPath string
	serverCPU string // taskset CPU lists: "0" and "1", or "" on a machine of one CPU
	clientCPU string
	ports     map[int]bool // the ports given to servers so far
	noThreads string       // why the free-threaded suite is left out ("": it is not)
	noInterps string       // why the interpreters suite is left out ("": it is not)
	// the free-threaded suite's interpreters, for its report
	threadVersions map[string]string
}

func (h *harness) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "==> "+format+"\n", args...)
}

func (h *harness) warnf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "!!  "+format+"\n", args...)
}

// expand fills a command-line template.
func (h *harness) expand(args []string, port int, app App, conf string) []string {
	r := strings.NewReplacer(
		"{m0serve}", filepath.Join(h.bin, "m0serve"),
		"{bin}", h.bin,
		"{venv}", h.opt.venv,
		"{mojo}", h.opt.mojoVenv,
		"{ftvenv}", filepath.Join(h.bench, ftVenv),
		"{gilvenv}", filepath.Join(h.bench, gilVenv),
		"{port}", strconv.Itoa(port),
		"{dir}", h.expandDir(app.Dir),
		"{module}", app.Module,
		"{callable}", app.Callable,
		"{static}", h.static,
		"{apps}", filepath.Join(h.bench, "apps"),
		"{examples}", filepath.Join(h.repo, "examples"),
		"{conf}", conf,
		"{confdir}", filepath.Dir(conf),
		"{nginx}", h.nginxPath,
	)
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = r.Replace(a)
	}
	return out
}

func (h *harness) expandDir(dir string) string {
	return strings.NewReplacer("{static}", h.static, "{apps}", filepath.Join(h.bench, "apps"),
		"{examples}", filepath.Join(h.repo, "examples")).Replace(dir)
}

// shown is a command line as the page prints it: paths relative to the
// checkout, the run's own temporary directory and port named.
func (h *harness) shown(argv []string, port int) string {
	ps := strconv.Itoa(port)
	out := make([]string, len(argv))
	for i, a := range argv {
		if a == ps {
			a = "$PORT"
		}
		a = strings.ReplaceAll(a, ":"+ps, ":$PORT")
		a = strings.ReplaceAll(a, h.work, "$TMP")
		a = strings.ReplaceAll(a, h.repo+"/", "")
		if strings.ContainsAny(a, " \"'") {
			a = strconv.Quote(a)
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

// --- setup ----------------------------------------------------------------

func (h *harness) setup(ss []Suite) error {
	var err error
	if h.work, err = os.MkdirTemp("", "m0bench-"); err != nil {
		return err
	}
	if err := h.debianPackages(ss); err != nil {
		return err
	}
	if err := h.ensureVenv(); err != nil {
		return err
	}
	if h.usesMojo(ss) {
		if err := h.ensureMojoVenv(); err != nil {
			return err
		}
	}
	if uses(ss, "freethreaded", "") {
		// With --venv (the test command's smoke run) the free-threaded
		// CPython is not built for the suite's sake (it takes minutes),
		// and a machine without a GIL 3.13 leaves the suite out.
		given := h.opt.venv != filepath.Join(h.bench, ".venv")
		ft, err := h.freeThreaded(given)
		if err != nil {
			return err
		}
		gil := gil313()
		switch {
		case ft == "":
			h.noThreads = "no free-threaded CPython is built (scripts/freethreaded builds one)"
		case gil == "":
			h.noThreads = "no GIL build of CPython 3.13 (python3.13 on PATH, or under ~/.pyenv/versions)"
		}
		if h.noThreads != "" && !given {
			return errors.New("the free-threaded suite: " + h.noThreads)
		}
		if h.noThreads != "" {
			h.warnf("suite freethreaded left out: %s", h.noThreads)
		} else if err := h.ensureThreadVenvs(ft, gil); err != nil {
			return err
		}
	}
	if uses(ss, "interpreters", "") && h.threadVersions == nil {
		// Subinterpreters need a GIL build of 3.12 or newer: the 3.13 the
		// free-threaded suite compares with.
		gil := gil313()
		switch {
		case gil == "" && h.opt.venv == filepath.Join(h.bench, ".venv"):
			return errors.New("the interpreters suite: no GIL build of CPython 3.13 (python3.13 on PATH, or under ~/.pyenv/versions)")
		case gil == "":
			h.noInterps = "no GIL build of CPython 3.13"
			h.warnf("suite interpreters left out: %s", h.noInterps)
		default:
			ver, err := h.makeVenvWith(gil, filepath.Join(h.bench, gilVenv), "requirements-ft.txt", nil)
			if err != nil {
				return err
			}
			h.threadVersions = map[string]string{"python (GIL)": ver}
		}
	}
	os.Setenv("PATH", filepath.Join(h.opt.venv, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	if err := h.build(ss); err != nil {
		return err
	}
	if uses(ss, "static", "") {
		if err := h.staticFiles(); err != nil {
			return err
		}
	}
	if uses(ss, "wsgi", "") {
		if err := h.djangoDatabase(); err != nil {
			return err
		}
	}
	raiseNoFile()
	if runtime.NumCPU() >= 2 {
		h.serverCPU, h.clientCPU = "0", "1"
	} else {
		h.warnf("one CPU: nothing is pinned, server and load share it")
	}
	h.machine = machine()
	h.versions = h.collectVersions()
	h.commit = commit(h.repo)
	return nil
}

func (h *harness) cleanup() {
	if h.work != "" {
		os.RemoveAll(h.work)
	}
}

// uses reports whether one of the suites named is selected (and, with a
// server key, has that server).
func uses(ss []Suite, suite, server string) bool {
	for _, s := range ss {
		if s.Name != suite {
			continue
		}
		if server == "" {
			return true
		}
		for _, sv := range s.Servers {
			if sv.Key == server {
				return true
			}
		}
	}
	return false
}

func (h *harness) debianPackages(ss []Suite) error {
	var missing []string
	if _, err := exec.LookPath("wrk"); err != nil {
		missing = append(missing, "wrk")
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		missing = append(missing, "util-linux")
	}
	h.nginxPath = nginxBinary()
	if h.nginxPath == "" && uses(ss, "static", "nginx") {
		missing = append(missing, "nginx")
	}
	if _, err := os.Stat(filepath.Join(h.opt.venv, "bin", "python")); err != nil && !h.opt.quick {
		if _, err := exec.LookPath("gcc"); err != nil {
			missing = append(missing, "gcc") // uWSGI builds from source
		}
	}
	if len(missing) == 0 {
		return nil
	}
	h.logf("apt-get install %s", strings.Join(missing, " "))
	sudo := []string{}
	if os.Geteuid() != 0 {
		sudo = []string{"sudo"}
	}
	for _, argv := range [][]string{
		append(sudo, "apt-get", "update", "-qq"),
		append(append(sudo, "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-qq", "--no-install-recommends"), missing...),
	} {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
		}
	}
	h.nginxPath = nginxBinary()
	return nil
}

func nginxBinary() string {
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx"
	}
	return ""
}

// ensureVenv makes bench/.venv from bench/requirements.txt with the python3
// on PATH (again when either changes), and installs m0's Python package
// into it. A --venv given is used as it is.
func (h *harness) ensureVenv() error {
	if h.opt.venv != filepath.Join(h.bench, ".venv") {
		if _, err := os.Stat(filepath.Join(h.opt.venv, "bin", "python")); err != nil {
			return fmt.Errorf("--venv %s: no bin/python in it", h.opt.venv)
		}
		return nil
	}
	return h.makeVenv(h.opt.venv, "requirements.txt",
		[]string{"install", "-q", "--disable-pip-version-check", "--no-deps", filepath.Join(h.repo, "python")})
}

// ensureThreadVenvs makes the free-threaded suite's two virtualenvs from
// bench/requirements-ft.txt: bench/.venv-3.13t on the free-threaded
// CPython ft (scripts/freethreaded's), bench/.venv-3.13 on the GIL build
// gil. Then it writes the .pyc of the suite's applications, so that no
// server loads them compiled by compile(), whose constants 3.13t does not
// make immortal (docs/running.md, "Modules without a .pyc"): the suite
// compares servers, not the state of a cache. The interpreters' versions
// go into the suite's report.
func (h *harness) ensureThreadVenvs(ft, gil string) error {
	h.threadVersions = map[string]string{}
	for _, v := range []struct{ py, dir, key string }{{ft, ftVenv, "python (free-threaded)"}, {gil, gilVenv, "python (GIL)"}} {
		ver, err := h.makeVenvWith(v.py, filepath.Join(h.bench, v.dir), "requirements-ft.txt", nil)
		if err != nil {
			return err
		}
		h.threadVersions[v.key] = ver
	}
	s, _ := suiteByName("freethreaded")
	args := []string{"-m", "compileall", "-q"}
	for _, app := range s.Apps {
		args = append(args, h.expandDir(app.Dir))
	}
	if out, err := exec.Command(ft, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("compileall: %v: %s", err, out)
	}
	return nil
}

// freeThreaded is the free-threaded CPython scripts/freethreaded built,
// building it first unless check (then "" when none is built).
func (h *harness) freeThreaded(check bool) (string, error) {
	args := []string{}
	if check {
		args = append(args, "--check")
	}
	cmd := exec.Command(filepath.Join(h.repo, "scripts", "freethreaded"), args...)
	cmd.Stderr = os.Stderr // the build's progress, the first time
	out, err := cmd.Output()
	if err != nil {
		if check {
			return "", nil
		}
		return "", fmt.Errorf("scripts/freethreaded: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// gil313 is a GIL build of CPython 3.13: the python3.13 on PATH, or the
// newest under pyenv, the first that runs as one (a pyenv shim may run
// none, or another version); "" when there is none.
func gil313() string {
	var candidates []string
	if p, err := exec.LookPath("python3.13"); err == nil {
		candidates = append(candidates, p)
	}
	home, _ := os.UserHomeDir()
	found, _ := filepath.Glob(filepath.Join(home, ".pyenv", "versions", "3.13*", "bin", "python3.13"))
	patch := func(path string) int { // 3.13.10 after 3.13.9
		v := filepath.Base(filepath.Dir(filepath.Dir(path)))
		n, _ := strconv.Atoi(strings.TrimPrefix(v, "3.13."))
		return n
	}
	slices.SortFunc(found, func(a, b string) int { return patch(b) - patch(a) })
	for _, py := range append(candidates, found...) {
		if gil, err := output(py, "-c", "import sys, sysconfig; print(sys.version_info[:2] == (3, 13) and not sysconfig.get_config_var('Py_GIL_DISABLED'))"); err == nil && gil == "True" {
			return py
		}
	}
	return ""
}

// usesMojo is whether a suite selected has the Mojo m0serve selected.
func (h *harness) usesMojo(ss []Suite) bool {
	for _, s := range ss {
		for _, sv := range s.Servers {
			if sv.Package == "m0serve-mojo" && h.selected(sv.Key) {
				return true
			}
		}
	}
	return false
}

// ensureMojoVenv makes bench/.venv-mojo from bench/requirements-mojo.txt
// (the Mojo m0serve and what its applications import), apart from
// bench/.venv: both would have a package named m0serve. With --venv or
// --mojo-venv given, it is used as it is: its servers are left out when it
// has none.
func (h *harness) ensureMojoVenv() error {
	if h.opt.venv != filepath.Join(h.bench, ".venv") || h.opt.mojoVenv != filepath.Join(h.bench, ".venv-mojo") {
		return nil
	}
	return h.makeVenv(h.opt.mojoVenv, "requirements-mojo.txt", nil)
}

// makeVenv makes the virtualenv dir from bench/REQ with the python3 on
// PATH, then runs pip with extra; again whenever the requirements or the
// python3 change.
func (h *harness) makeVenv(dir, req string, extra []string) error {
	py, err := exec.LookPath("python3")
	if err != nil {
		return errors.New("python3 not found on PATH")
	}
	_, err = h.makeVenvWith(py, dir, req, extra)
	return err
}

// makeVenvWith is makeVenv with the interpreter py; it returns py's version.
func (h *harness) makeVenvWith(py, dir, req string, extra []string) (string, error) {
	ver, err := output(py, "-c", "import sys; print(sys.version.split()[0])")
	if err != nil {
		return "", err
	}
	reqPath := filepath.Join(h.bench, req)
	b, err := os.ReadFile(reqPath)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	stamp := ver + " " + hex.EncodeToString(sum[:])
	stampPath := filepath.Join(dir, ".bench-stamp")
	if b, err := os.ReadFile(stampPath); err == nil && strings.TrimSpace(string(b)) == stamp {
		return ver, nil
	}
	pip := filepath.Join(dir, "bin", "pip")
	have, _ := output(filepath.Join(dir, "bin", "python"), "-c", "import sys; print(sys.version.split()[0])")
	steps := [][]string{}
	if have != ver {
		steps = append(steps, []string{py, "-m", "venv", "--clear", dir})
	}
	steps = append(steps, []string{pip, "install", "-q", "--disable-pip-version-check", "-r", reqPath})
	if extra != nil {
		steps = append(steps, append([]string{pip}, extra...))
	}
	for _, argv := range steps {
		h.logf("%s", strings.Join(argv, " "))
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
		}
	}
	return ver, os.WriteFile(stampPath, []byte(stamp+"\n"), 0o644)
}

// build compiles m0serve and the harness's Go servers and tools into
// bench/.bin, and Centrifugo at its pinned version for the fan-out suite.
func (h *harness) build(ss []Suite) error {
	if err := os.MkdirAll(h.bin, 0o755); err != nil {
		return err
	}
	pkgs := []string{"./cmd/m0serve"}
	if uses(ss, "static", "fileserver") {
		pkgs = append(pkgs, "./bench/fileserver")
	}
	if uses(ss, "embed", "") {
		pkgs = append(pkgs, "./bench/embed")
	}
	if uses(ss, "gohost", "") || uses(ss, "embed", "fasthttp") {
		pkgs = append(pkgs, "./bench/gohost")
	}
	if uses(ss, "fanout", "") {
		pkgs = append(pkgs, "./bench/holds")
	}
	h.logf("go build -o bench/.bin/ %s", strings.Join(pkgs, " "))
	cmd := exec.Command("go", append([]string{"build", "-o", h.bin + "/"}, pkgs...)...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = h.repo, os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build: %w", err)
	}
	if uses(ss, "fanout", "centrifugo") && !h.opt.quick {
		cf := filepath.Join(h.bin, "centrifugo")
		if v, _ := output(cf, "version"); !strings.Contains(v, "v"+centrifugoVersion+" ") {
			h.logf("go install github.com/centrifugal/centrifugo/v6@v%s (about 90 s the first time)", centrifugoVersion)
			cmd := exec.Command("go", "install", "-ldflags", "-X github.com/centrifugal/centrifugo/v6/internal/build.Version="+centrifugoVersion,
				"github.com/centrifugal/centrifugo/v6@v"+centrifugoVersion)
			cmd.Env = append(os.Environ(), "GOBIN="+h.bin)
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("building Centrifugo: %w", err)
			}
		}
	}
	return nil
}

// staticFiles writes the static suite's files: random bytes of fixed sizes.
func (h *harness) staticFiles() error {
	h.static = filepath.Join(h.work, "static")
	if err := os.MkdirAll(h.static, 0o755); err != nil {
		return err
	}
	for name, size := range map[string]int{"1k.bin": 1024, "1m.bin": 1 << 20} {
		b := make([]byte, size)
		rand.Read(b)
		if err := os.WriteFile(filepath.Join(h.static, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// djangoDatabase is the Django page's database: a fresh SQLite file,
// migrated and signed 100 times, that every server reads (M0_EXAMPLE_DB).
func (h *harness) djangoDatabase() error {
	h.djangoDB = filepath.Join(h.work, "guestbook.sqlite3")
	os.Setenv("M0_EXAMPLE_DB", h.djangoDB)
	manage := filepath.Join(h.repo, "examples", "django_site", "manage.py")
	py := filepath.Join(h.opt.venv, "bin", "python")
	for _, argv := range [][]string{{py, manage, "migrate", "--noinput", "-v0"}, {py, manage, "seed", "100"}} {
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("the Django page's database: %s: %v\n%s", strings.Join(argv[1:], " "), err, out)
		}
	}
	return nil
}

// raiseNoFile lifts the soft limit on open files to the hard one: 1,024
// connections and 10,000 held streams need it, and the servers inherit it.
func raiseNoFile() {
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil && lim.Cur < lim.Max {
		lim.Cur = lim.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
}

func output(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.Model = strings.TrimSpace(v)
				break
			}
		}
	}
	m.Kernel, _ = output("uname", "-r")
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		fmt.Sscanf(string(b), "MemTotal: %d kB", &kb)
		m.MemGiB = int((kb + 1<<19) >> 20)
	}
	return m
}

func commit(repo string) string {
	c, err := output("git", "-C", repo, "rev-parse", "--short", "HEAD")
	if err != nil {
		return "unknown"
	}
	if st, _ := output("git", "-C", repo, "status", "--porcelain", "--", ".", ":!bench/results", ":!docs/benchmarks.md", ":!docs/benchmarks"); st != "" {
		c += "+dirty"
	}
	return c
}

func (h *harness) collectVersions() map[string]string {
	v := map[string]string{"go": runtime.Version()}
	py := filepath.Join(h.opt.venv, "bin", "python")
	const script = `import importlib.metadata as m, json, sys
out = {"python": sys.version.split()[0]}
for name in sys.argv[1:]:
    try:
        out[name] = m.version(name)
    except m.PackageNotFoundError:
        pass
print(json.dumps(out))`
	if out, err := exec.Command(py, "-c", script, "gunicorn", "uWSGI", "granian", "uvicorn", "uvloop", "httptools", "hypercorn",
		"websockets", "Flask", "Django", "fastapi", "starlette", "pydantic").Output(); err == nil {
		var m map[string]string
		if json.Unmarshal(out, &m) == nil {
			for k, x := range m {
				v[k] = x
			}
		}
	}
	if out, err := output(filepath.Join(h.opt.mojoVenv, "bin", "python"), "-c", "import importlib.metadata as m; print(m.version('m0serve'))"); err == nil {
		v["m0serve-mojo"] = out
	}
	if out, err := exec.Command("wrk", "-v").CombinedOutput(); len(out) > 0 {
		_ = err // wrk -v exits 1
		if f := strings.Fields(string(out)); len(f) >= 2 {
			v["wrk"] = f[1]
		}
	}
	if h.nginxPath != "" {
		if out, _ := output(h.nginxPath, "-v"); strings.Contains(out, "nginx/") {
			v["nginx"] = out[strings.Index(out, "nginx/")+len("nginx/"):]
		}
	}
	if out, err := output(filepath.Join(h.bin, "centrifugo"), "version"); err == nil {
		if f := strings.Fields(out); len(f) >= 2 {
			v["centrifugo"] = strings.TrimPrefix(f[1], "v")
		}
	}
	return v
}

// --- one suite ----------------------------------------------------------------

// runSuite measures every selected application on every selected server at
// each concurrency, and returns the suite's report.
func (h *harness) runSuite(s Suite) *Report {
	rep := &Report{
		Suite: s.Name, Title: s.Title, About: s.About, Date: time.Now().UTC().Format(time.RFC3339),
		Commit: h.commit, Machine: h.machine, Versions: map[string]string{}, Quick: h.opt.quick,
	}
	rep.Method = h.method(s)
	rep.Targets = s.Targets
	busy := cpuBusy([]int{0, 1}, time.Second)
	rep.Machine.BusyIdle = fmt.Sprintf("CPU 0 %.0f%%, CPU 1 %.0f%%", busy[0], busy[1])
	for _, sv := range s.Servers {
		if !h.selected(sv.Key) {
			continue
		}
		rep.Servers = append(rep.Servers, ServerInfo{Key: sv.Key, Label: sv.Label, Peer: sv.Peer, Base: sv.Base, Group: sv.Group, InProcess: sv.InProcess})
		for _, k := range versionKeys(sv.Package) {
			if v, ok := h.versions[k]; ok {
				rep.Versions[k] = v
			}
		}
	}
	for _, k := range []string{"python", "go", "wrk"} {
		rep.Versions[k] = h.versions[k]
	}
	if s.Name == "freethreaded" || s.Name == "interpreters" {
		delete(rep.Versions, "python") // the harness's own, which serves nothing here
		maps.Copy(rep.Versions, h.threadVersions)
	}
	for _, app := range s.Apps {
		if !h.selected(app.Name) {
			continue
		}
		rep.Apps = append(rep.Apps, AppInfo{Name: app.Name, About: app.About})
	}
	if s.Tool == "holds" {
		h.runHolds(s, rep)
		return rep
	}
	if s.Name == "freethreaded" && h.noThreads != "" || s.Name == "interpreters" && h.noInterps != "" {
		return rep // no runs: "nothing selected"
	}
	for _, app := range s.Apps {
		if !h.selected(app.Name) {
			continue
		}
		var servers []Server
		for _, sv := range s.Servers {
			if h.selected(sv.Key) && sv.serves(app.Name) {
				servers = append(servers, sv)
			}
		}
		if interleaves(s) {
			rep.Runs = append(rep.Runs, h.measureTogether(s, servers, app, rep)...)
			continue
		}
		for _, sv := range servers {
			rep.Runs = append(rep.Runs, h.measure(s, sv, app, rep)...)
		}
	}
	return rep
}

func versionKeys(pkg string) []string {
	switch pkg {
	case "uvicorn":
		return []string{"uvicorn", "uvloop", "httptools", "websockets"}
	case "granian", "hypercorn":
		return []string{pkg, "uvloop"}
	case "gunicorn":
		return []string{"gunicorn", "uvicorn"}
	case "":
		return nil
	}
	return []string{pkg}
}

func (h *harness) method(s Suite) Method {
	m := Method{Tool: s.Tool, DurationS: h.opt.duration.Seconds(), WarmupS: h.opt.warmup.Seconds(), Threads: s.Threads,
		TimeoutS: h.opt.timeout.Seconds(), Rate: s.Rate}
	if interleaves(s) {
		m.Rounds = max(h.opt.rounds, 1)
	} else if s.Tool != "holds" {
		m.Runs = max(h.opt.rounds, 1)
	}
	if m.Threads == 0 {
		m.Threads = 1
	}
	if !s.Unpinned {
		m.ServerCPU, m.ClientCPU = h.serverCPU, h.clientCPU
	}
	switch s.Tool {
	case "wrk":
		m.Description = fmt.Sprintf("wrk -t%d -cN -d%s --timeout %s --latency after a %s warm-up at 64 connections; each concurrency in turn against the same server process.",
			m.Threads, secondsArg(m.DurationS), secondsArg(m.TimeoutS), secondsArg(m.WarmupS))
	case "wsload":
		m.Description = fmt.Sprintf("bench/.bin/bench wsload: N connections, each a loop of send and wait for the echo, %s measured after a %s warm-up at 64 connections.",
			secondsArg(m.DurationS), secondsArg(m.WarmupS))
	case "holds":
		m.Description = "bench/holds: the streams opened and held, the server's RSS read before and after; then frames published at the rate for a 3 s warm-up and the measured window."
	}
	if m.Rounds > 0 {
		m.Description += " " + describeRounds(m.Rounds)
	} else if m.Runs > 0 {
		m.Description += fmt.Sprintf(" One server at a time, %d loads in a row at each concurrency; the load of median rate reported.", m.Runs)
	}
	return m
}

func (h *harness) selected(name string) bool {
	return len(h.opt.only) == 0 || slices.Contains(h.opt.only, name) || !h.onlyNames(name)
}

// onlyNames reports whether --only names a thing of the same kind as name
// in some suite: --only granian leaves every application selected.
func (h *harness) onlyNames(name string) bool {
	kindOf := func(n string) (server, app bool) {
		for _, s := range suites() {
			for _, sv := range s.Servers {
				server = server || sv.Key == n
			}
			for _, a := range s.Apps {
				app = app || a.Name == n
			}
		}
		return
	}
	isServer, isApp := kindOf(name)
	for _, o := range h.opt.only {
		oServer, oApp := kindOf(o)
		if (isServer && oServer) || (isApp && oApp) {
			return true
		}
	}
	return false
}

// holdCount is how many idle connections measure the suite's memory per
// connection (none for the suites that do not measure it).
func (h *harness) holdCount(s Suite) int {
	if !s.Memory || s.Tool == "holds" {
		return 0
	}
	if h.opt.quick {
		return 64
	}
	return holdConns
}

func (h *harness) concurrencies(s Suite) []int {
	if len(h.opt.concs) > 0 && s.Tool != "holds" {
		return h.opt.concs
	}
	if !h.opt.quick {
		return s.Concurrency
	}
	if s.Tool == "holds" {
		return []int{100}
	}
	if slices.Contains(s.Concurrency, 64) {
		return []int{64}
	}
	return s.Concurrency[:1]
}

// A contender is one server started on one application: checked, and
// idle until loaded.
type contender struct {
	sv      Server
	p       *proc
	url     string
	command string // as the page prints it
	logPath string
}

// errLeftOut is launch's answer for a server that is not installed: it is
// left out, with a note, not failed.
var errLeftOut = errors.New("bench: not installed")

// launch starts sv on app, pinned to the server CPU, in a session of its
// own, and polls it until it answers correctly.
//
// A server is left out when a program it runs is not installed: its command,
// and the backend's after a "--" (bench/embed -proxy).
func (h *harness) launch(s Suite, sv Server, app App, rep *Report) (*contender, error) {
	port, err := h.freePort()
	if err != nil {
		return nil, err
	}
	conf := ""
	if sv.Config != nil {
		if conf, err = sv.Config(h, port, app); err != nil {
			return nil, err
		}
	}
	argv := h.expand(sv.args(app.Name), port, app, conf)
	for _, cmd := range commands(argv) {
		if _, err := exec.LookPath(cmd); err != nil || cmd == "" {
			note := fmt.Sprintf("%s left out: %s is not installed.", sv.Label, h.rel(cmd))
			if !slices.Contains(rep.Notes, note) {
				rep.Notes = append(rep.Notes, note)
			}
			h.logf("%s / %s: not installed (%s), left out", app.Name, sv.Label, cmd)
			return nil, errLeftOut
		}
	}
	path := app.Path
	if p, ok := sv.Paths[app.Name]; ok {
		path = p
	}
	if path == "" {
		path = "/"
	}
	cpus := h.serverCPU
	if s.Unpinned {
		cpus = ""
	}
	env := h.expand(sv.Env, port, app, "")
	shown := argv
	if len(env) > 0 { // the environment that picks the server's Python
		shown = append(append([]string{"env"}, env...), argv...)
	}
	c := &contender{sv: sv, url: "http://127.0.0.1:" + strconv.Itoa(port) + path,
		command: h.shown(shown, port), logPath: filepath.Join(h.raw, fmt.Sprintf("%s-%s-%s.log", s.Name, app.Name, sv.Key))}
	if cpus != "" {
		c.command = "taskset -c " + cpus + " " + c.command
	}
	h.logf("%s / %s: %s", app.Name, sv.Label, c.command)
	if c.p, err = startServer(argv, env, cpus, c.logPath); err != nil {
		return nil, fmt.Errorf("start: %v", err)
	}
	track(c.p)
	if err := h.ready(c.p, s, app, c.url); err != nil {
		c.stop(rep, app)
		return nil, fmt.Errorf("%v (log: %s)", err, h.rel(c.logPath))
	}
	return c, nil
}

// freePort is a free port not given to another server of this run that
// may not have bound it yet.
func (h *harness) freePort() (int, error) {
	for range 100 {
		port, err := procfs.FreePort()
		if err != nil {
			return 0, err
		}
		if !h.ports[port] {
			if h.ports == nil {
				h.ports = map[int]bool{}
			}
			h.ports[port] = true
			return port, nil
		}
	}
	return 0, errors.New("no free port")
}

// stop stops the server and notes one that did not stop as asked.
func (c *contender) stop(rep *Report, app App) {
	if c.p == nil {
		return
	}
	if err := c.p.stop(); err != nil {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%s on %s: %v", c.sv.Label, app.Name, err))
	}
	untrack(c.p)
	c.p = nil
}

// warm loads the server at 64 connections for the warm-up.
func (h *harness) warm(s Suite, c *contender) error {
	if h.opt.warmup <= 0 {
		return nil
	}
	if _, err := h.loadFor(c)(s, c.url, 64, h.opt.warmup); err != nil {
		return fmt.Errorf("warm-up: %v", err)
	}
	return nil
}

// memory measures the server's memory per idle connection, in the suites
// that measure it.
func (h *harness) memory(s Suite, c *contender, app App, rep *Report) {
	n := h.holdCount(s)
	if n == 0 || c.sv.InProcess {
		return
	}
	m := h.holdIdle(c.p, s, app, c.url, n)
	m.Server = c.sv.Key
	if m.PerConnKiB != nil {
		h.logf("%s / %s: %d idle connections, RSS %d -> %d KiB, %.2f KiB each", app.Name, c.sv.Label, m.Open, m.RSSIdleKiB, m.RSSHeldKiB, *m.PerConnKiB)
	} else {
		h.logf("%s / %s: memory per connection: %s", app.Name, c.sv.Label, m.Note)
	}
	if h.opt.quick && m.PerConnKiB == nil && !c.sv.Peer {
		h.failures = append(h.failures, fmt.Sprintf("%s: %s on %s: memory per connection: %s", s.Name, c.sv.Label, app.Name, m.Note))
	}
	rep.Memory = append(rep.Memory, m)
}

// failAll is the failed runs of a server that has no figures at any
// concurrency.
func (h *harness) failAll(s Suite, sv Server, app App, conc []int, msg string) []Run {
	h.warnf("%s / %s: %s", app.Name, sv.Label, msg)
	var runs []Run
	for _, c := range conc {
		runs = append(runs, Run{App: app.Name, Server: sv.Key, Concurrency: c, Failed: msg})
	}
	if h.opt.quick || !sv.Peer {
		h.failures = append(h.failures, fmt.Sprintf("%s: %s on %s: %s", s.Name, sv.Label, app.Name, msg))
	}
	return runs
}

// loadOnce is one measured load of the server at concurrency c, after the
// CPUs are quiet, with what the report notes of it; its figures are logged
// after what (a round's number, or nothing).
func (h *harness) loadOnce(s Suite, c *contender, app App, conc int, rep *Report, what string) Run {
	if busy := h.quiet(s); busy != "" {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%s on %s at %d: %s just before the run (other work, or a server still answering the previous load); treat it as noisy.", c.sv.Label, app.Name, conc, busy))
	}
	r := h.once(c, s, conc)
	r.App, r.Server, r.Command = app.Name, c.sv.Key, c.command
	if r.Failed == "" && !c.p.alive() {
		r.Failed = "the server exited during the run (log: " + h.rel(c.logPath) + ")"
	}
	if r.Failed != "" {
		h.warnf("%s / %s at %d: %s", app.Name, c.sv.Label, conc, r.Failed)
	} else if c.sv.InProcess {
		h.logf("%s%s / %s: %.0f calls/s, CPU %.1f µs/call", what, app.Name, c.sv.Label, r.RPS, r.CPUPerRequest())
	} else {
		h.logf("%s%s / %s at %d: %.0f/s, p50 %.2f ms, p99 %.2f ms, server CPU %.1f µs/request%s", what, app.Name, c.sv.Label, conc,
			r.RPS, r.P50ms, r.P99ms, r.CPUPerRequest(), errNote(r.Errors))
	}
	if r.Failed == "" && !s.Unpinned && r.ClientCPUS >= 0.9*h.opt.duration.Seconds()*float64(max(s.Threads, 1)) && !h.opt.quick {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%s on %s at %d: the load tool used %.0f%% of its core: the rate may be the client's ceiling, not the server's.",
			c.sv.Label, app.Name, conc, 100*r.ClientCPUS/h.opt.duration.Seconds()))
	}
	return r
}

// judge adds a figure that is wrong to the run's failures: in a smoke run
// any error or no request; in any run, a failure of m0's.
func (h *harness) judge(s Suite, sv Server, app App, c int, r Run) {
	if (h.opt.quick && (r.Errors.Total() > 0 || r.Requests == 0)) || (r.Failed != "" && (h.opt.quick || !sv.Peer)) {
		h.failures = append(h.failures, fmt.Sprintf("%s: %s on %s at %d: failed %q, errors %q, %d requests", s.Name, sv.Label, app.Name, c, r.Failed, r.Errors.String(), r.Requests))
	}
}

// measure starts one server on one application, checks its answer, warms
// it up, and loads it at each concurrency in turn, --rounds times in a row:
// the sequential method, for the suites that do not interleave.
func (h *harness) measure(s Suite, sv Server, app App, rep *Report) []Run {
	conc := h.concurrencies(s)
	c, err := h.launch(s, sv, app, rep)
	if err == errLeftOut {
		return nil
	}
	if err != nil {
		return h.failAll(s, sv, app, conc, err.Error())
	}
	defer c.stop(rep, app)
	if err := h.warm(s, c); err != nil {
		return h.failAll(s, sv, app, conc, err.Error())
	}
	h.memory(s, c, app, rep)
	var runs []Run
	for _, n := range conc {
		var tries []Run
		for range max(h.opt.rounds, 1) {
			r := h.loadOnce(s, c, app, n, rep, "")
			tries = append(tries, r)
			if r.Failed != "" {
				break
			}
		}
		r := median(tries)
		h.judge(s, sv, app, n, r)
		runs = append(runs, r)
	}
	return runs
}

// once is one measured load of c's server at concurrency conc (an
// in-process row's loop), with the server's CPU time and RSS over it.
func (h *harness) once(c *contender, s Suite, conc int) Run {
	p := c.p
	cpu0, rss0 := sessionUsage(p.pid())
	sampler := sampleRSS(procfs.Session(p.pid()), 200*time.Millisecond)
	r, err := h.loadFor(c)(s, c.url, conc, h.opt.duration)
	peak := sampler.stop()
	cpu1, _ := sessionUsage(p.pid())
	r.Concurrency = conc
	r.CPUSeconds, r.RSSBeforeKB, r.RSSPeakKB = cpu1-cpu0, rss0, peak
	if err != nil {
		r.Failed = err.Error()
	}
	return r
}

// median is the run of median rate among tries (the first failure, if
// one failed), with every try's rate kept beside it, and the median of the
// tries' server CPU per request (and each try's).
func median(tries []Run) Run {
	for _, t := range tries {
		if t.Failed != "" {
			return t
		}
	}
	sorted := append([]Run{}, tries...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].RPS < sorted[j].RPS })
	m := sorted[(len(sorted)-1)/2]
	m.Rates, m.CPUPerReq = nil, nil
	var cpu []float64
	for _, t := range tries {
		if len(tries) > 1 {
			m.Rates = append(m.Rates, t.RPS)
		}
		if v := cpuPerRequest(t.CPUSeconds, t.Requests); v > 0 {
			cpu = append(cpu, v)
		}
	}
	m.CPUusPerReq = medianOf(cpu)
	if len(tries) > 1 && len(cpu) == len(tries) {
		m.CPUPerReq = cpu
	}
	return m
}

func errNote(e Errors) string {
	if e.Total() == 0 {
		return ""
	}
	return "; errors: " + e.String()
}

func (h *harness) rel(p string) string {
	if r, err := filepath.Rel(h.repo, p); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return p
}

// quiet waits up to 30 s for the benchmark CPUs to be idle (a server can
// still be answering what a load of 1,024 connections queued when the load
// ends), and says how busy they were when they did not become so.
func (h *harness) quiet(s Suite) string {
	if h.opt.quick {
		return ""
	}
	var b []float64
	for range 30 {
		b = cpuBusy([]int{0, 1}, time.Second)
		if b[0] <= busyLimit && b[1] <= busyLimit {
			return ""
		}
	}
	return fmt.Sprintf("CPU 0 %.0f%% and CPU 1 %.0f%% busy for 30 s", b[0], b[1])
}

// load runs the suite's tool at concurrency c for d.
func (h *harness) load(s Suite, url string, c int, d time.Duration) (Run, error) {
	var r Run
	threads := max(s.Threads, 1)
	pin := []string{"taskset", "-c", h.clientCPU}
	if s.Unpinned || h.clientCPU == "" {
		pin = nil
	}
	var argv []string
	switch s.Tool {
	case "wrk":
		argv = append(pin, wrkArgs(threads, c, d.Seconds(), h.opt.timeout.Seconds(), url)...)
	case "wsload":
		self, err := os.Executable()
		if err != nil {
			return r, err
		}
		argv = append(pin, self, "wsload", "-url", "ws"+strings.TrimPrefix(url, "http"), "-c", strconv.Itoa(c),
			"-d", d.String(), "-timeout", h.opt.timeout.String())
	default:
		return r, fmt.Errorf("unknown tool %q", s.Tool)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d+60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if cmd.ProcessState != nil {
		r.ClientCPUS = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	}
	r.Raw = out.String()
	if err != nil {
		return r, fmt.Errorf("%s: %v: %s", filepath.Base(argv[len(pin)]), err, strings.TrimSpace(lastLine(errb.String())))
	}
	if s.Tool == "wrk" {
		err = parseWrk(r.Raw, &r)
	} else {
		cpu := r.ClientCPUS
		err = json.Unmarshal(out.Bytes(), &r)
		r.Raw, r.ClientCPUS = "", cpu
	}
	return r, err
}

// loadFor is how c's server is loaded: the suite's tool, or an in-process
// row's loop.
func (h *harness) loadFor(c *contender) func(Suite, string, int, time.Duration) (Run, error) {
	if c.sv.InProcess {
		return h.loop
	}
	return h.load
}

// loop is the load of an in-process row (bench/apps/inprocess.py at url's
// port): the application called in a loop for d, on the request url names,
// in the one Python process; its rate is calls over the loop's own time.
// The concurrency of the rounds it shares is ignored: a loop has none.
func (h *harness) loop(_ Suite, url string, _ int, d time.Duration) (Run, error) {
	var r Run
	u, err := neturl.Parse(url)
	if err != nil {
		return r, err
	}
	path := u.RequestURI()
	u.Path, u.RawQuery = "/loop", neturl.Values{"path": {path}, "seconds": {strconv.FormatFloat(d.Seconds(), 'f', -1, 64)}}.Encode()
	client := &http.Client{Timeout: d + 60*time.Second}
	resp, err := client.Post(u.String(), "", nil)
	if err != nil {
		return r, fmt.Errorf("in-process loop: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return r, fmt.Errorf("in-process loop: %s %v: %s", resp.Status, err, trim(body))
	}
	var got struct {
		Calls   int64   `json:"calls"`
		Seconds float64 `json:"seconds"`
	}
	if err := json.Unmarshal(body, &got); err != nil || got.Calls <= 0 || got.Seconds <= 0 {
		return r, fmt.Errorf("in-process loop: answered %s", trim(body))
	}
	r.Requests, r.RPS, r.Raw = got.Calls, float64(got.Calls)/got.Seconds, string(body)
	return r, nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// ready polls until the server answers correctly: 200, and the body and
// Content-Type the application's answer has (for a file, its bytes).
func (h *harness) ready(p *proc, s Suite, app App, url string) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(readyTimeout)
	var last error
	for time.Now().Before(deadline) {
		if !p.alive() {
			return fmt.Errorf("exited during startup (%v)", p.err)
		}
		if s.Tool == "wsload" {
			if last = wsEcho(url); last == nil {
				return nil
			}
			time.Sleep(200 * time.Millisecond)
			continue
		}
		resp, err := client.Get(url)
		if err != nil {
			last = err
			time.Sleep(200 * time.Millisecond)
			continue
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("reading %s: %v", url, err)
		}
		if resp.StatusCode != http.StatusOK {
			last = fmt.Errorf("%s answered %d", url, resp.StatusCode)
			time.Sleep(200 * time.Millisecond)
			continue
		}
		return checkAnswer(app, h.static, resp.Header, body)
	}
	return fmt.Errorf("no correct answer within %s: %v", readyTimeout, last)
}

// checkAnswer is whether a 200 answer is the application's.
func checkAnswer(app App, staticDir string, header http.Header, body []byte) error {
	if app.Body != "" && string(body) != app.Body {
		return fmt.Errorf("unexpected body %q (want %q)", trim(body), app.Body)
	}
	if app.Contains != "" && !bytes.Contains(body, []byte(app.Contains)) {
		return fmt.Errorf("unexpected body %q (want it to contain %q)", trim(body), app.Contains)
	}
	if ct := header.Get("Content-Type"); app.ContentType != "" && !strings.HasPrefix(ct, app.ContentType) {
		return fmt.Errorf("unexpected Content-Type %q (want %s)", ct, app.ContentType)
	}
	if app.File != "" {
		want, err := os.ReadFile(filepath.Join(staticDir, app.File))
		if err != nil {
			return err
		}
		if cl := header.Get("Content-Length"); cl != strconv.Itoa(len(want)) {
			return fmt.Errorf("Content-Length %q, want %d", cl, len(want))
		}
		if !bytes.Equal(body, want) {
			return fmt.Errorf("the body differs from %s", app.File)
		}
	}
	return nil
}

func trim(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}

// wsEcho opens a WebSocket and wants one message echoed.
func wsEcho(url string) error {
	d := websocket.Dialer{HandshakeTimeout: 2 * time.Second}
	c, resp, err := d.Dial("ws"+strings.TrimPrefix(url, "http"), nil)
	if err != nil {
		if resp != nil {
			return fmt.Errorf("handshake: %v (%d)", err, resp.StatusCode)
		}
		return err
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if err := c.WriteMessage(websocket.TextMessage, []byte("m0 bench ready?")); err != nil {
		return err
	}
	kind, msg, err := c.ReadMessage()
	if err != nil {
		return err
	}
	if kind != websocket.TextMessage || string(msg) != "m0 bench ready?" {
		return fmt.Errorf("echo: got %d %q", kind, msg)
	}
	return nil
}

// nginxConfig writes nginx's configuration: one process (no master, no
// daemon), sendfile, no access log, every path under the run's directory.
// open_file_cache stays off (the default): like the others, nginx opens
// the file for each request.
func nginxConfig(h *harness, port int, app App) (string, error) {
	dir := filepath.Join(h.work, "nginx")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	conf := fmt.Sprintf(`worker_processes 1;
daemon off;
master_process off;
error_log %[1]s/error.log warn;
pid %[1]s/nginx.pid;
events { worker_connections 2048; }
http {
    client_body_temp_path %[1]s/client_body_temp;
    proxy_temp_path %[1]s/proxy_temp;
    fastcgi_temp_path %[1]s/fastcgi_temp;
    uwsgi_temp_path %[1]s/uwsgi_temp;
    scgi_temp_path %[1]s/scgi_temp;
    types { application/octet-stream bin; }
    default_type application/octet-stream;
    sendfile on;
    tcp_nopush on;
    access_log off;
    keepalive_requests 100000;
    server {
        listen 127.0.0.1:%[2]d backlog=1024;
        location /static/ { alias %[3]s/; }
    }
}
`, dir, port, h.static)
	path := filepath.Join(dir, "nginx.conf")
	return path, os.WriteFile(path, []byte(conf), 0o644)
}

// commands are the programs a command line runs: its first word, and the
// first after "--" where one starts a backend's command line.
func commands(argv []string) []string {
	if len(argv) == 0 {
		return []string{""}
	}
	out := []string{argv[0]}
	if i := slices.Index(argv, "--"); i >= 0 {
		if i+1 < len(argv) {
			out = append(out, argv[i+1])
		} else {
			out = append(out, "")
		}
	}
	return out
}
