"""Shared fixtures and helpers for the m0serve end-to-end suite.

Every test talks to the real binary ($M0SERVE, default .bin/m0serve) over
loopback TCP with real clients: requests, http.client, curl and raw sockets.
"""

import os
import random
import re
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest
import requests

E2E = Path(__file__).resolve().parent
ROOT = E2E.parents[1]
APPS = E2E / "apps"
EXAMPLES = ROOT / "examples"
M0SERVE = Path(os.environ.get("M0SERVE") or ROOT / ".bin" / "m0serve")
NETHOST = ROOT / ".bin" / "nethost"
# The two front ends: fasthttp (m0serve's) and net/http (a Go program's,
# tests/e2e/nethost); serve_on starts an application on either.
FRONT_ENDS = ("fasthttp", "nethttp")

HOST = "127.0.0.1"
READY_PREFIX = "🔥 m0serve:"
READY_RE = re.compile(
    r"^🔥 m0serve: (?P<spec>\S+) on http://(?P<host>\[[^\]]+\]|[^:/\s]+):(?P<port>\d+) "
    r"\(protocol=(?P<protocol>(?:wsgi|asgi|hold|go)(?:\+(?:wsgi|asgi|hold))*) workers=1(?: threads=\d+)?\)"
    r"(?: blocking-threads=(?P<threads>\d+)(?P<auto> \(auto\))?)?"
    r"(?: loop=(?:pump|inverted) event-loop=(?P<loop>uvloop|asyncio))?$"
)
RECORD_START = re.compile(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d [A-Z]+ ")
WORKER_RE = re.compile(r"^\[worker 0\] pid=(?P<pid>\d+) armed for a graceful stop$")

READY_TIMEOUT = 20  # seconds for the server to print its ready line
STOP_TIMEOUT = 30  # seconds for a graceful stop
HTTP_TIMEOUT = 10  # seconds for any single request


# --------------------------------------------------------------------------
# small utilities


def _below_ephemeral():
    """The ports free_port picks from: 10000 up to the first of the kernel's
    ephemeral range, or None where that range starts too low to leave one."""
    try:
        first = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return range(10000, first) if first >= 12000 else None


def free_port():
    """A port nothing is bound to now, below the kernel's ephemeral range
    where it can: a port the kernel hands out (what port 0 gives) can be
    handed again, to a client's connection, between the pick and the
    server's bind. The rule of Go's testutil.FreePort."""
    span = _below_ephemeral()
    if span:
        start = random.randrange(len(span))
        for i in range(min(len(span), 200)):
            port = span[(start + i * 7919) % len(span)]
            with socket.socket() as s:
                try:
                    s.bind((HOST, port))
                except OSError:
                    continue
                return port
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


# The interpreter under test (the venv first on PATH, which m0serve loads
# too) is a free-threaded build: the pool's threads run Python at once, and
# an ASGI application is refused.
FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
NEEDS_GIL = ("needs a GIL build: m0serve refuses an ASGI application on a free-threaded "
             "CPython (docs/running.md#free-threaded-cpython)")


# What m0serve's refusal of an ASGI application on such a build says.
ASGI_REFUSED = "is an ASGI application, and "
ASGI_PANIC = "needs a GIL build of CPython, and the one loaded is free-threaded"

# scripts/test runs the ASGI modules a second time with M0_INVERTED=1 in
# the environment of every server (the inverted loop, docs/asgi.md): a
# server the inverted loop does not serve (a WSGI application, a mount,
# --metrics, ...) is refused with 78, which test_inverted.py checks; here
# its test is skipped.
INVERTED = os.environ.get("M0_INVERTED") == "1"
INVERTED_REFUSED = "M0_INVERTED=1 "


# scripts/test runs the suite once per CPython. What a module marked `once`
# checks is decided by m0serve's Go side (listeners, workers and their
# replacement, limits, the strict reading, static files), alike for every
# interpreter of one kind: it runs with the first version of each kind
# (scripts/test's kind_of), and M0_E2E_ONCE=done, set for the later ones,
# deselects it. A test of such a module that checks what the interpreter
# prints or runs (a traceback, the m0serve package in a child process) is
# marked `each_version` and is never deselected.
ONCE_DONE = os.environ.get("M0_E2E_ONCE") == "done"


def pytest_configure(config):
    config.addinivalue_line("markers", "gil: serves an ASGI application, which needs a GIL build; "
                            "skipped on a free-threaded CPython")
    config.addinivalue_line("markers", "once: checks what Go decides, alike for every CPython of one kind; "
                            "deselected when M0_E2E_ONCE=done (scripts/test, after the first of a kind)")
    config.addinivalue_line("markers", "each_version: in a module marked once, checks what the interpreter "
                            "prints or runs: never deselected")


def pytest_collection_modifyitems(config, items):
    if ONCE_DONE:
        def ran_before(item):
            return item.get_closest_marker("once") and not item.get_closest_marker("each_version")
        done = [item for item in items if ran_before(item)]
        if done:
            config.hook.pytest_deselected(items=done)
            items[:] = [item for item in items if not ran_before(item)]
    if not FREE_THREADED:
        return
    for item in items:
        if item.get_closest_marker("gil"):
            item.add_marker(pytest.mark.skip(reason=NEEDS_GIL))


def auto_blocking_threads():
    """The documented default for --blocking-threads: min(cores, 8) on a
    GIL build, one a core on a free-threaded one."""
    cores = len(os.sched_getaffinity(0))
    return cores if FREE_THREADED else min(cores, 8)


def wait_until(predicate, timeout, what, interval=0.05):
    """Poll predicate() until it returns something truthy; fail after timeout.

    `what` is a string or a callable returning one (evaluated on failure)."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() >= deadline:
            detail = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout}s waiting for {detail}")
        time.sleep(interval)


def http_request(method, path, port, headers=(), body=b"", version="HTTP/1.1", host=True):
    """Bytes of one HTTP request; adds Host (unless host=False) and, for a
    non-empty body without a Transfer-Encoding header, Content-Length."""
    lines = [f"{method} {path} {version}"]
    names = {name.lower() for name, _ in headers}
    if host and "host" not in names:
        lines.append(f"Host: {HOST}:{port}")
    lines += [f"{name}: {value}" for name, value in headers]
    if body and "content-length" not in names and "transfer-encoding" not in names:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class RawReader:
    """Buffered reads from a socket with one overall deadline.

    Never raises on timeout or reset: it records them (timed_out, reset) and
    reports end of data, so tests can assert on what actually happened."""

    def __init__(self, sock, timeout=HTTP_TIMEOUT):
        self.sock = sock
        self.deadline = time.monotonic() + timeout
        self.buf = b""
        self.raw = b""
        self.eof = False
        self.reset = False
        self.timed_out = False

    def _fill(self):
        if self.eof or self.timed_out:
            return False
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            self.timed_out = True
            return False
        self.sock.settimeout(remaining)
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            self.timed_out = True
            return False
        except ConnectionResetError:
            self.eof = self.reset = True
            return False
        if not data:
            self.eof = True
            return False
        self.buf += data
        self.raw += data
        return True

    def read_until(self, delim):
        """Up to and including delim, or None if the data ends first."""
        while delim not in self.buf:
            if not self._fill():
                return None
        end = self.buf.index(delim) + len(delim)
        out, self.buf = self.buf[:end], self.buf[end:]
        return out

    def read_exact(self, n):
        """n bytes, or fewer if the data ends first."""
        while len(self.buf) < n and self._fill():
            pass
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_to_eof(self):
        while self._fill():
            pass
        out, self.buf = self.buf, b""
        return out

    def at_eof(self, wait=1.0):
        """True if the peer closes (or reset) the connection within `wait` s
        with no further data."""
        self.deadline = time.monotonic() + wait
        if self.buf:
            return False
        return not self._fill() and self.eof


class RawResponse:
    def __init__(self):
        self.version = None
        self.status = None
        self.reason = None
        self.headers = []  # [(name, value)] in wire order
        self.head = b""
        self.body = b""  # de-chunked
        self.chunks = []  # chunk payloads (chunked responses only)
        self.chunk_times = []  # time.monotonic() when each chunk was complete
        self.chunked = False
        self.complete = False  # framing says the body ended properly
        self.eof = False  # the peer closed the connection
        self.timed_out = False
        self.raw = b""  # every byte received for this response (and any extra after it)

    def header(self, name, default=None):
        values = self.header_values(name)
        return values[0] if values else default

    def header_values(self, name):
        return [v for n, v in self.headers if n.lower() == name.lower()]

    def __repr__(self):
        return (f"<RawResponse {self.status} complete={self.complete} eof={self.eof} "
                f"timed_out={self.timed_out} raw={self.raw[:600]!r}>")


def read_response(reader, method="GET"):
    """Read one HTTP/1.x response from a RawReader."""
    resp = RawResponse()
    start = len(reader.raw) - len(reader.buf)  # where this response begins in reader.raw
    head = reader.read_until(b"\r\n\r\n")
    if head is None:
        resp.eof, resp.timed_out, resp.raw = reader.eof, reader.timed_out, reader.raw[start:]
        return resp
    resp.head = head
    status_line, *header_lines = head[:-4].decode("latin-1").split("\r\n")
    resp.version, status, *reason = status_line.split(" ", 2)
    resp.status = int(status)
    resp.reason = reason[0] if reason else ""
    for line in header_lines:
        name, _, value = line.partition(":")
        resp.headers.append((name, value.strip()))

    te = (resp.header("Transfer-Encoding") or "").lower()
    cl = resp.header("Content-Length")
    if method == "HEAD" or resp.status in (204, 304) or 100 <= resp.status < 200:
        resp.complete = True
    elif "chunked" in te:
        resp.chunked = True
        while True:
            size_line = reader.read_until(b"\r\n")
            if size_line is None:
                break
            size = int(size_line.split(b";")[0].strip(), 16)
            if size == 0:
                while True:  # trailers, up to the empty line
                    trailer = reader.read_until(b"\r\n")
                    if trailer is None:
                        break
                    if trailer == b"\r\n":
                        resp.complete = True
                        break
                break
            data = reader.read_exact(size + 2)
            resp.chunks.append(data[:size])
            resp.chunk_times.append(time.monotonic())
            if len(data) < size + 2:
                break
        resp.body = b"".join(resp.chunks)
    elif cl is not None:
        resp.body = reader.read_exact(int(cl))
        resp.complete = len(resp.body) == int(cl)
    else:
        resp.body = reader.read_to_eof()
        resp.complete = reader.eof and not reader.timed_out
    resp.eof, resp.timed_out, resp.raw = reader.eof, reader.timed_out, reader.raw[start:]
    return resp


# --------------------------------------------------------------------------
# the server under test


class Server:
    """One m0serve subprocess in its own process group."""

    def __init__(self, spec, workdir, app_dir=APPS, blocking_threads=None, env=None,
                 args=(), validated=False, binary=None, places=None, wrap=(), popen=None):
        self.spec = spec
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.host = HOST
        self.validated = validated
        # binary: a Go program on the m0 host (examples/go_host), in place of m0serve.
        self.binary = Path(binary or M0SERVE)
        # places: the arguments that say where to listen, in place of
        # --host and --port (["--bind", "unix:..."], or [] under socket
        # activation); wrap: a command that runs m0serve (systemd-socket-activate).
        where = ["--host", HOST, "--port", str(self.port)] if places is None else list(places)
        self.argv = [*wrap, str(self.binary), *where]
        self.popen = popen or {}  # more arguments of Popen (pass_fds)
        if app_dir is not None:  # None: a Go program that loads no Python
            self.argv += ["--app-dir", str(app_dir)]
        if blocking_threads is not None:
            self.argv += ["--blocking-threads", str(blocking_threads)]
        self.argv += [*args, spec] if spec is not None else list(args)
        self.env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}
        self.env = {k: v for k, v in self.env.items() if v is not None}
        self.stdout_path = self.workdir / "stdout.log"
        self.stderr_path = self.workdir / "stderr.log"
        self.proc = None
        self.returncode = None
        self.ready_line = None

    # -- lifecycle

    def start(self):
        if not self.binary.exists():
            pytest.fail(f"{self.binary} not found (build it: go build -o .bin/ ./cmd/m0serve ./examples/go_host ./examples/mixed ./tests/e2e/nethost)")
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                         cwd=self.workdir, env=self.env, start_new_session=True, **self.popen)
        return self

    def wait_ready(self, timeout=READY_TIMEOUT):
        def ready():
            for line in self.stdout.splitlines():
                if line.startswith(READY_PREFIX):
                    return line
            if self.proc.poll() is not None:
                refused = ((self.proc.returncode == 78 and ASGI_REFUSED in self.stderr)
                           or ASGI_PANIC in self.stderr)  # a Go program's asgi.New
                if INVERTED and self.proc.returncode == 78 and INVERTED_REFUSED in self.stderr:
                    self.returncode = 78
                    pytest.skip("not served by the inverted loop (M0_INVERTED=1)")
                if FREE_THREADED and refused:
                    # A test that serves an ASGI application among others
                    # (a parameter, a mount, a Go program's): the refusal
                    # test_freethreaded.py checks, not this test's subject.
                    self.returncode = 78
                    pytest.skip(NEEDS_GIL)
                raise AssertionError(
                    f"m0serve exited with {self.proc.returncode} before printing its ready line\n"
                    f"{self.describe()}")
            return None

        try:
            self.ready_line = wait_until(ready, timeout, lambda: f"the ready line\n{self.describe()}")
        except AssertionError:
            self.kill()
            raise
        return self

    def wait_exit(self, timeout):
        """Exit code, or None if still running after timeout."""
        try:
            self.returncode = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        return self.returncode

    def send_signal(self, sig):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def stop(self, sig=signal.SIGTERM, timeout=STOP_TIMEOUT):
        """Signal the server, wait for it to exit, and return its exit code.
        Kills the whole process group (and fails) if it does not exit in time."""
        if self.proc is None:
            return None
        if self.proc.poll() is not None:
            self.returncode = self.proc.returncode
            return self.returncode
        self.send_signal(sig)
        rc = self.wait_exit(timeout)
        if rc is None:
            self.kill()
            raise AssertionError(f"m0serve did not exit within {timeout}s of {sig.name}\n{self.describe()}")
        return rc

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=10)

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    # -- captured output

    @property
    def stdout(self):
        return self.stdout_path.read_bytes().decode("utf-8", "replace")

    @property
    def stderr(self):
        return self.stderr_path.read_bytes().decode("utf-8", "replace")

    def mark(self):
        """A position in stderr; pass it to stderr_since()/wait_for_stderr()."""
        return self.stderr_path.stat().st_size

    def stderr_since(self, mark):
        return self.stderr_path.read_bytes()[mark:].decode("utf-8", "replace")

    def records(self, since=0):
        """The log records of stderr (after `since`): each a line as Go's log
        writes it, with the lines printed below it (a traceback) joined to
        it."""
        out = []
        for line in self.stderr_since(since).splitlines():
            if RECORD_START.match(line) or not out:
                out.append(line)
            else:
                out[-1] += "\n" + line
        return out

    def wait_for_record(self, pattern, since=0, timeout=5.0):
        """Log records (see records()) whose first line matches regex
        `pattern`; fails if none shows up within timeout."""
        rx = re.compile(pattern)

        def matching():
            return [r for r in self.records(since) if rx.search(r.split("\n", 1)[0])]

        return wait_until(matching, timeout, lambda: (
            f"a log record matching {pattern!r}; stderr since mark:\n{self.stderr_since(since)[-4000:]}"))

    def wait_for_stderr(self, pattern, since=0, timeout=5.0):
        """Lines of stderr (after `since`) matching regex `pattern`; fails if
        none shows up within timeout."""
        rx = re.compile(pattern)

        def matching():
            return [line for line in self.stderr_since(since).splitlines() if rx.search(line)]

        return wait_until(matching, timeout, lambda: (
            f"a stderr line matching {pattern!r}; stderr since mark:\n{self.stderr_since(since)[-4000:]}"))

    def describe(self):
        return (f"command: {' '.join(self.argv)}\n"
                f"--- stdout ---\n{self.stdout[-3000:]}\n--- stderr ---\n{self.stderr[-6000:]}")

    # -- clients

    def url(self, path="/"):
        return f"http://{self.host}:{self.port}{path}"

    def request(self, method, path, **kwargs):
        kwargs.setdefault("timeout", HTTP_TIMEOUT)
        kwargs.setdefault("allow_redirects", False)
        return requests.request(method, self.url(path), **kwargs)

    def get_json(self, path, **kwargs):
        """GET path, assert 200, and return the decoded JSON body."""
        r = self.get(path, **kwargs)
        assert r.status_code == 200, f"GET {path} -> {r.status_code}: {r.text[:2000]}"
        return r.json()

    def get(self, path, **kwargs):
        return self.request("GET", path, **kwargs)

    def post(self, path, **kwargs):
        return self.request("POST", path, **kwargs)

    def connect(self, timeout=HTTP_TIMEOUT):
        return socket.create_connection((self.host, self.port), timeout=timeout)

    def raw(self, method, path, headers=(), body=b"", version="HTTP/1.1", timeout=HTTP_TIMEOUT):
        """Send one request on a fresh connection and read one response."""
        with self.connect() as sock:
            sock.sendall(http_request(method, path, self.port, headers, body, version))
            return read_response(RawReader(sock, timeout), method)


class ServerFactory:
    """Starts servers and stops them all (SIGTERM, exit code 0) at the end."""

    def __init__(self, tmp_dir):
        self.tmp_dir = Path(tmp_dir)
        self.servers = []

    def __call__(self, spec, *, wait=True, **kwargs):
        workdir = self.tmp_dir / f"server{len(self.servers)}"
        server = Server(spec, workdir, **kwargs)
        self.servers.append(server)
        server.start()
        if wait:
            server.wait_ready()
        return server

    def close(self):
        problems = []
        for server in self.servers:
            if server.proc is None or server.returncode is not None:
                continue  # never started, or a test already checked its exit
            if server.proc.poll() is not None:
                problems.append(f"m0serve exited early with {server.proc.returncode}\n{server.describe()}")
                continue
            try:
                rc = server.stop()
            except AssertionError as exc:
                problems.append(str(exc))
                continue
            if rc != 0:
                problems.append(f"m0serve exited with {rc} after SIGTERM (want 0)\n{server.describe()}")
            if server.validated:
                # A validator failure inside a request reaches the log in the
                # server's error line (error="python: AssertionError: ..."),
                # not at the start of a line.
                complaints = [line for line in server.stderr.splitlines()
                              if "AssertionError" in line or "WSGIWarning" in line
                              or "garbage collected without being closed" in line]
                if complaints:
                    problems.append("wsgiref.validate complained about the server:\n"
                                    + "\n".join(complaints) + f"\n{server.describe()}")
        if problems:
            raise AssertionError("\n\n".join(problems))


@pytest.fixture
def serve(tmp_path):
    """Factory: serve(spec, app_dir=..., blocking_threads=..., env=...) -> a
    ready Server; every server is stopped with SIGTERM afterwards and must
    exit 0."""
    factory = ServerFactory(tmp_path)
    yield factory
    factory.close()


def serve_on(factory, front_end, spec, *, env=None, **kwargs):
    """Serves spec (MODULE:ATTR in apps/) on one of FRONT_ENDS with a serve
    factory: by m0serve, or at every path tests/e2e/nethost keeps for no
    mount of its own ($M0_NETHOST_APP)."""
    if front_end == "fasthttp":
        return factory(spec, env=env, **kwargs)
    return factory(None, binary=NETHOST, env={**(env or {}), "M0_NETHOST_APP": spec}, **kwargs)


@pytest.fixture(scope="module")
def serve_module(tmp_path_factory):
    """Like `serve`, but the servers live for the whole test module."""
    factory = ServerFactory(tmp_path_factory.mktemp("servers"))
    yield factory
    factory.close()


@pytest.fixture(scope="module")
def pep_server(serve_module):
    return serve_module("pep3333:application", validated=True)


@pytest.fixture(scope="module")
def broken_server(serve_module):
    return serve_module("broken:application")


@pytest.fixture(scope="module")
def hello_server(serve_module):
    return serve_module("hello_validated:application", validated=True)


@pytest.fixture(scope="module")
def flask_server(serve_module):
    return serve_module("flask_validated:application", validated=True)


@pytest.fixture(scope="module")
def django_server(serve_module, tmp_path_factory):
    db = tmp_path_factory.mktemp("django") / "db.sqlite3"
    env = {"M0_EXAMPLE_DB": str(db)}
    migrate = subprocess.run(
        [sys.executable, str(EXAMPLES / "django_site" / "manage.py"), "migrate", "--noinput"],
        env={**os.environ, **env}, cwd=EXAMPLES / "django_site", stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=120)
    assert migrate.returncode == 0, f"manage.py migrate failed:\n{migrate.stdout}\n{migrate.stderr}"
    return serve_module("django_validated:application", env=env, validated=True)


def children_of(pid):
    """The children of pid, whichever of its threads is the parent; none once
    it is gone (a process may end while this reads)."""
    out = set()
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            out |= {int(c) for c in (task / "children").read_text().split()}
    except (FileNotFoundError, ProcessLookupError):
        pass
    return out
