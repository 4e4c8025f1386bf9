"""Where m0serve listens: --bind (HOST:PORT, unix:PATH, fd://N, several at
once), --uds, systemd socket activation and sd_notify, --backlog and --pid;
in one process and under --workers, on both front ends and for a Go
program on the public host. Real clients (httpx over a unix socket, curl,
requests), every request counted."""

import os
import shutil
import signal
import socket
import stat
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import requests
import pytest

from conftest import FRONT_ENDS, HOST, HTTP_TIMEOUT, M0SERVE, READY_PREFIX, ROOT, free_port, serve_on, wait_until

# What this module checks is decided in Go: it runs with one CPython (conftest.py).
pytestmark = pytest.mark.once

GO_HOST = ROOT / ".bin" / "go_host"

APP = "listen_app:application"
ACTIVATE = shutil.which("systemd-socket-activate")
needs_activate = pytest.mark.skipif(ACTIVATE is None, reason="systemd-socket-activate is not installed "
                                    "(Debian's systemd package; scripts/test installs it)")


def activated(serve, port, **kwargs):
    """Starts m0serve under systemd-socket-activate, which starts it on the
    first connection, as systemd does for a socket unit: that connection
    (to port) is made, and answered once m0serve is ready."""
    # systemd-socket-activate passes on only the variables -E names.
    raw = kwargs.pop("wrap")
    wrap = [raw[0], *(a for k in kwargs.get("env", {}) for a in ("-E", k)), *raw[1:]]
    server = serve(APP, places=kwargs.pop("places", []), wait=False, wrap=wrap, **kwargs)
    wait_until(lambda: listening(port), 10, "systemd-socket-activate to listen")
    first = socket.create_connection((HOST, port), timeout=HTTP_TIMEOUT)
    try:
        server.wait_ready()
        first.sendall(b"GET / HTTP/1.1\r\nHost: m0\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := first.recv(65536):
            data += chunk
        assert data.startswith(b"HTTP/1.1 200"), data
    finally:
        first.close()
    return server


def listening(port):
    return subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True).stdout.strip()


def uds_client(path):
    return httpx.Client(transport=httpx.HTTPTransport(uds=str(path)), timeout=HTTP_TIMEOUT)


def uds_get(path, target="/"):
    with uds_client(path) as c:
        r = c.get("http://m0" + target)
    assert r.status_code == 200, r.text
    return r.json()


def tcp_get(port, target="/", host=HOST):
    r = httpx.get(f"http://{host}:{port}{target}", timeout=HTTP_TIMEOUT)
    assert r.status_code == 200, r.text
    return r.json()


def run_exit(argv, env=None, timeout=60, **kwargs):
    """Runs m0serve to its exit: (code, stderr)."""
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                       env={**os.environ, **(env or {})}, **kwargs)
    return p.returncode, p.stderr


def load(get, n, threads=8):
    """n requests through get, threads at a time: the pids that answered,
    every request counted (one that fails raises)."""
    with ThreadPoolExecutor(threads) as pool:
        return [r["pid"] for r in pool.map(lambda _: get(), range(n))]


# --------------------------------------------------------------------------
# unix sockets


@pytest.mark.parametrize("front", FRONT_ENDS)
def test_unix_socket_serves_and_is_removed_at_exit(serve, tmp_path, front):
    path = tmp_path / "m0.sock"
    server = serve_on(serve, front, APP, places=["--bind", f"unix:{path}"])
    assert f" on unix:{path} (protocol=" in server.ready_line, server.ready_line
    st = os.stat(path)
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o666
    got = uds_get(path)
    assert got["remote_addr"] in (None, ""), got  # no client address over a unix socket
    assert got["server_name"] == "m0" and got["seen"] == []
    assert server.stop() == 0
    assert not path.exists()


def test_uds_and_its_mode(serve, tmp_path):
    path = tmp_path / "m0.sock"
    server = serve(APP, places=["--uds", str(path), "--unix-mode", "600"])
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert uds_get(path)["pid"] == server.proc.pid


def test_a_dead_servers_socket_is_replaced(serve, tmp_path):
    path = tmp_path / "m0.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.listen()
    s.close()  # the file stays, nobody listens: stale
    assert path.exists()
    serve(APP, places=["--bind", f"unix:{path}"])
    uds_get(path)


def test_a_live_servers_socket_is_refused(tmp_path):
    path = tmp_path / "m0.sock"
    other = socket.socket(socket.AF_UNIX)
    other.bind(str(path))
    other.listen()
    try:
        code, err = run_exit([str(M0SERVE), "--bind", f"unix:{path}", "--app-dir", str(tmp_path), "x:app"])
        assert code == 78, err
        assert f"unix:{path} is held by a live server" in err and "bind another path" in err, err
        # Left alone, and still the other server's.
        c = socket.socket(socket.AF_UNIX)
        c.connect(str(path))
        c.close()
    finally:
        other.close()


def test_a_file_that_is_not_a_socket_is_refused(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("mine")
    code, err = run_exit([str(M0SERVE), "--bind", f"unix:{path}", "--app-dir", str(tmp_path), "x:app"])
    assert code == 78 and "exists and is not a socket" in err, err
    assert path.read_text() == "mine"


def test_bind_beside_host_is_refused(tmp_path):
    code, err = run_exit([str(M0SERVE), "--bind", f"unix:{tmp_path}/a.sock", "--host", "127.0.0.1", "x:app"])
    assert code == 78 and "--bind and --host both say where to listen" in err, err


# --------------------------------------------------------------------------
# several places, and workers


@pytest.mark.parametrize("workers", [1, 2])
def test_several_binds_serve_alike(serve, tmp_path, workers):
    path, port, port6 = tmp_path / "m0.sock", free_port(), free_port()
    server = serve(APP, places=["--bind", f"{HOST}:{port}", "--bind", f"unix:{path}", "--bind", f"[::1]:{port6}"],
                   args=["--workers", str(workers)])
    assert f" on http://{HOST}:{port}, unix:{path}, http://[::1]:{port6} (protocol=wsgi workers={workers})" \
        in server.ready_line, server.ready_line
    n = 300
    # A client each thread: httpcore's pool is not safe to share between
    # threads that run at once (free-threaded CPython: a TypeError in its
    # has_expired).
    clients, mine = [], threading.local()

    def over_unix():
        if not hasattr(mine, "c"):
            mine.c = uds_client(path)
            clients.append(mine.c)
        r = mine.c.get("http://m0/")
        assert r.status_code == 200
        return r.json()
    try:
        pids = load(lambda: tcp_get(port), n) + load(over_unix, n) + load(lambda: tcp_get(port6, host="[::1]"), n)
    finally:
        for c in clients:
            c.close()
    assert len(pids) == 3 * n
    if workers == 2:
        assert len(set(pids)) == 2, set(pids)  # the connections spread over both workers
    assert server.stop() == 0
    assert not path.exists()


@pytest.mark.parametrize("workers", [1, 2])
def test_an_inherited_descriptor(serve, workers):
    ln = socket.socket()
    ln.bind((HOST, 0))
    ln.listen(16)
    port = ln.getsockname()[1]
    fd = ln.fileno()
    try:
        server = serve(APP, places=["--bind", f"fd://{fd}"], args=["--workers", str(workers)],
                       popen={"pass_fds": (fd,)})
        assert f" on http://{HOST}:{port} (protocol=" in server.ready_line, server.ready_line
        assert len(load(lambda: tcp_get(port), 100)) == 100
    finally:
        ln.close()


def test_a_descriptor_that_is_not_a_listener_is_refused(tmp_path):
    code, err = run_exit([str(M0SERVE), "--bind", "fd://0", "x:app"])
    assert code == 78 and "--bind fd://0: the descriptor is not a socket" in err, err


def test_go_program_over_a_unix_socket(serve, tmp_path):
    path = tmp_path / "go.sock"
    s = serve(None, binary=GO_HOST, app_dir=None, places=["--uds", str(path)])
    assert f" on unix:{path} (protocol=go" in s.ready_line, s.ready_line
    with uds_client(path) as c:
        r = c.get("http://m0/hello")
    assert r.json() == {"hello": "world", "worker": 0, "thread": 0}


# --------------------------------------------------------------------------
# the listen queue and the pid file


def listen_queue(port):
    """The listen queue of the socket on port, as ss shows it (Send-Q)."""
    out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True, check=True).stdout
    return {int(line.split()[2]) for line in out.splitlines()}


@pytest.mark.skipif(shutil.which("ss") is None, reason="ss (iproute2) is not installed")
@pytest.mark.parametrize("workers", [1, 2])
def test_backlog(serve, workers):
    server = serve(APP, args=["--backlog", "77", "--workers", str(workers)])
    assert listen_queue(server.port) == {77}
    default = serve(APP)
    with open("/proc/sys/net/core/somaxconn") as f:
        assert listen_queue(default.port) == {int(f.read())}


@pytest.mark.parametrize("workers", [1, 2])
def test_pid_file(serve, tmp_path, workers):
    pidfile = tmp_path / "m0.pid"
    server = serve(APP, args=["--pid", str(pidfile), "--workers", str(workers)])
    assert pidfile.read_text() == f"{server.proc.pid}\n"
    # A second server on that file while the first runs: refused.
    code, err = run_exit([str(M0SERVE), "--port", str(free_port()), "--app-dir", str(tmp_path), "--pid", str(pidfile), "x:app"])
    assert code == 78 and f"names pid {server.proc.pid}, which is running" in err, err
    assert server.stop() == 0
    assert not pidfile.exists()


# --------------------------------------------------------------------------
# systemd: socket activation and sd_notify


class NotifySocket:
    """A notify socket of the test's own, as systemd's: every message
    received, in order."""

    def __init__(self, path):
        self.path = str(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(0.1)
        self.messages = []
        self.lock = threading.Lock()
        self.done = False
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        while not self.done:
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            with self.lock:
                self.messages.append((time.monotonic(), data.decode()))

    def wait_for(self, line, timeout=20):
        def found():
            with self.lock:
                return next((m for _, m in self.messages if line in m.split("\n")), None)
        return wait_until(found, timeout, lambda: f"{line!r} among {self.messages}")

    def count(self, line):
        with self.lock:
            return sum(1 for _, m in self.messages if line in m.split("\n"))

    def close(self):
        self.done = True
        self.thread.join()
        self.sock.close()


@pytest.fixture
def notify(tmp_path):
    n = NotifySocket(tmp_path / "notify")
    yield n
    n.close()


@pytest.mark.parametrize("workers", [None, 1, 2], ids=["one-process", "workers-1", "workers-2"])
def test_sd_notify(serve, notify, workers):
    server = serve(APP, args=["--workers", str(workers)] if workers else [], wait=False,
                   env={"NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "200000"})
    ready = notify.wait_for("READY=1")
    # READY=1 comes once every worker serves.
    server.wait_ready()
    banners = [line for line in server.stdout.splitlines() if line.startswith(READY_PREFIX)]
    assert len(banners) == (workers or 1), banners
    status = "STATUS=" + {None: "serving on", 1: "1 worker serving on", 2: "2 workers serving on"}[workers] \
        + f" http://{HOST}:{server.port}"
    assert status in ready.split("\n") and f"MAINPID={server.proc.pid}" in ready.split("\n"), ready
    # WATCHDOG=1 every 100 ms (half of WATCHDOG_USEC).
    wait_until(lambda: notify.count("WATCHDOG=1") >= 3, 5, "three watchdog pings")
    # Neither the application nor a worker sees the manager's variables.
    assert tcp_get(server.port)["seen"] == []
    assert notify.count("READY=1") == 1
    assert server.stop() == 0
    notify.wait_for("STOPPING=1")


def test_sd_notify_on_reload(serve, notify, tmp_path):
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    shutil.copy(os.path.join(os.path.dirname(__file__), "apps", "listen_app.py"), app_dir / "listen_app.py")
    server = serve(APP, app_dir=app_dir, args=["--reload"], env={"NOTIFY_SOCKET": notify.path})
    notify.wait_for("READY=1")
    before = tcp_get(server.port)["pid"]
    (app_dir / "listen_app.py").write_text((app_dir / "listen_app.py").read_text() + "\n# changed\n")
    notify.wait_for("RELOADING=1")
    wait_until(lambda: notify.count("READY=1") == 2, 20, "READY=1 after the reload")
    assert tcp_get(server.port)["pid"] != before


@needs_activate
@pytest.mark.parametrize("workers", [1, 2])
def test_socket_activation(serve, tmp_path, notify, workers):
    port, path = free_port(), tmp_path / "act.sock"
    wrap = [ACTIVATE, "-l", f"{HOST}:{port}", "-l", str(path), "--fdname=web:api"]
    server = activated(serve, port, wrap=wrap, args=["--workers", str(workers)], env={"NOTIFY_SOCKET": notify.path})
    assert f" on http://{HOST}:{port}, unix:{path} (protocol=wsgi workers={workers})" in server.ready_line, server.ready_line
    notify.wait_for("READY=1")
    pids = load(lambda: tcp_get(port), 200) + load(lambda: uds_get(path), 200)
    assert len(pids) == 400
    assert tcp_get(port)["seen"] == []  # LISTEN_* and NOTIFY_SOCKET taken out
    assert server.stop() == 0
    assert path.exists()  # systemd's socket: not m0serve's to remove


@needs_activate
def test_socket_activation_and_a_flag(serve, tmp_path):
    port = free_port()
    # A flag that names the socket systemd passed is the same place: served.
    server = activated(serve, port, places=["--bind", f"{HOST}:{port}"], wrap=[ACTIVATE, "-l", f"{HOST}:{port}"])
    assert tcp_get(port)["pid"] == server.proc.pid
    # One that names another is refused, with what systemd passed.
    other, passed = free_port(), free_port()
    p = subprocess.Popen([ACTIVATE, "-l", f"{HOST}:{passed}", str(M0SERVE), "--bind", f"{HOST}:{other}",
                          "--app-dir", str(tmp_path), "x:app"], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: listening(passed), 10, "systemd-socket-activate to listen")
    socket.create_connection((HOST, passed), timeout=HTTP_TIMEOUT).close()  # it starts m0serve
    _, err = p.communicate(timeout=60)
    code = p.returncode
    assert code == 78 and "(socket activation)" in err and f"{HOST}:{other}, which is not one of them" in err, err


# --------------------------------------------------------------------------
# the deployment files of docs/deploying.md, served as written

DEPLOY = ROOT / "examples" / "deploy"


def unit_values(path, key):
    """Every KEY=value of a systemd unit file, in order."""
    out = []
    for line in path.read_text().splitlines():
        if line.startswith(key + "="):
            out.append(line[len(key) + 1:])
    return out


@needs_activate
def test_the_systemd_units_as_written(serve, tmp_path, notify):
    """m0serve.service's ExecStart under m0serve.socket's ListenStream=
    places (the paths and the port moved to the test's own), with a notify
    socket: READY=1, requests on both sockets, the health path, STOPPING=1."""
    path, port = tmp_path / "m0serve.sock", free_port()
    listens = []
    for where in unit_values(DEPLOY / "m0serve.socket", "ListenStream"):
        where = where.replace("/run/m0serve/m0serve.sock", str(path)).replace("127.0.0.1:8000", f"{HOST}:{port}")
        listens += ["-l", where]
    assert listens == ["-l", str(path), "-l", f"{HOST}:{port}"]
    names = unit_values(DEPLOY / "m0serve.socket", "FileDescriptorName")
    (exec_start,) = unit_values(DEPLOY / "m0serve.service", "ExecStart")
    argv = exec_start.split()
    assert argv[0] == "/srv/app/.venv/bin/m0serve" and argv[-1] == "myproject.wsgi:application", argv
    env = dict(e.split("=", 1) for e in unit_values(DEPLOY / "m0serve.service", "Environment"))
    env["M0_WORKERS"] = "2"  # the unit's 4, on this machine's two cores
    server = activated(serve, port, wrap=[ACTIVATE, *listens, f"--fdname={':'.join(names)}"],
                       args=argv[1:-1], env={**env, "NOTIFY_SOCKET": notify.path})
    assert "workers=2" in server.ready_line
    ready = notify.wait_for("READY=1")
    assert f"STATUS=2 workers serving on unix:{path}, http://{HOST}:{port}" in ready.split("\n"), ready
    assert len(load(lambda: uds_get(path), 100) + load(lambda: tcp_get(port), 100)) == 200
    with uds_client(path) as c:
        assert c.get("http://m0/healthz").status_code == 200
    assert server.stop() == 0
    notify.wait_for("STOPPING=1")


NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)


@pytest.mark.skipif(NGINX is None, reason="nginx is not installed (scripts/test installs it)")
def test_nginx_in_front_over_a_unix_socket(serve, tmp_path):
    """examples/deploy/nginx.conf, its socket path and port moved to the
    test's own, in front of m0serve on that socket: plain requests on kept
    connections, a streamed response unbuffered, and a WebSocket."""
    import websockets.sync.client

    from conftest import APPS
    sock, port = tmp_path / "m0.sock", free_port()
    serve("asgi_raw:application", app_dir=APPS, places=["--bind", f"unix:{sock}"])
    site = (DEPLOY / "nginx.conf").read_text().replace("/run/m0serve/m0serve.sock", str(sock)) \
        .replace("listen 80;", f"listen {HOST}:{port};")
    (tmp_path / "site.conf").write_text(site)
    (tmp_path / "nginx.conf").write_text(
        # As root, nginx's workers run as nobody, who cannot reach a socket
        # under the test's own temporary directory.
        ("user root;\n" if os.geteuid() == 0 else "") +
        f"daemon off;\npid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;\nevents {{}}\n"
        f"http {{\n access_log off;\n client_body_temp_path {tmp_path};\n proxy_temp_path {tmp_path};\n"
        f" include {tmp_path}/site.conf;\n}}\n")
    nginx = subprocess.Popen([NGINX, "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")],
                             stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        def up():
            try:
                return socket.create_connection((HOST, port), timeout=1)
            except OSError:
                assert nginx.poll() is None, nginx.stderr.read().decode()
                return None
        wait_until(up, 10, "nginx to listen").close()
        with httpx.Client(base_url=f"http://{HOST}:{port}", timeout=HTTP_TIMEOUT) as c:
            for _ in range(50):
                r = c.post("/echo", content=b"through nginx")
                assert r.status_code == 200 and r.content == b"through nginx"
            with c.stream("GET", "/stream?n=3&delay=0.3") as r:
                t0, times = time.monotonic(), []
                for line in r.iter_lines():
                    times.append(time.monotonic() - t0)
                assert len(times) == 3 and times[0] < 0.25, times  # unbuffered: the first before the rest
        with websockets.sync.client.connect(f"ws://{HOST}:{port}/ws/echo") as ws:
            ws.send("hello over a unix socket")
            assert ws.recv(timeout=HTTP_TIMEOUT) == "hello over a unix socket"
    finally:
        nginx.send_signal(signal.SIGQUIT)
        nginx.wait(timeout=10)


def test_the_kubernetes_deployment_as_written(serve):
    """examples/deploy/kubernetes.yaml: its container's command and
    environment serve (the application and the port the test's own), the
    probes' path answers before Python, and the stop fits the grace period:
    preStop's sleep, the five-second drain and a margin."""
    import yaml
    doc = yaml.safe_load((DEPLOY / "kubernetes.yaml").read_text())
    assert doc["kind"] == "Deployment"
    pod = doc["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    args = list(c["args"])
    assert c["command"] == ["m0serve"] and args[-1] == "myproject.wsgi:application", (c["command"], args)
    port = c["ports"][0]["containerPort"]
    for probe in ("readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"]["port"] in ("http", port), c[probe]
    health = c["readinessProbe"]["httpGet"]["path"]
    assert c["livenessProbe"]["httpGet"]["path"] == health
    assert args[args.index("--health-path") + 1] == health
    sleep = c["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert pod["terminationGracePeriodSeconds"] >= sleep + 5 + 1, (pod["terminationGracePeriodSeconds"], sleep)
    env = {e["name"]: e["value"] for e in c["env"]}
    where = args.index("--host")
    del args[where:where + 4]  # --host 0.0.0.0 --port 8000: the test's own
    server = serve(APP, args=args[:-1], env=env)
    assert "workers=2" in server.ready_line
    r = requests.get(server.url(health), timeout=HTTP_TIMEOUT)
    assert r.status_code == 200 and r.json()["status"] == "ok"
    assert requests.get(server.url("/"), timeout=HTTP_TIMEOUT).status_code == 200
    assert "m0_http_requests_in_flight" in requests.get(server.url("/__metrics"), timeout=HTTP_TIMEOUT).text
    began = time.monotonic()
    assert server.stop() == 0
    assert time.monotonic() - began < pod["terminationGracePeriodSeconds"] - sleep
