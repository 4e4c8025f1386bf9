"""SIGUSR2: the process that listens (a single process, or the supervisor
of --workers) starts the m0serve on PATH again with its listeners
inherited (cloudflare/tableflip); once the successor serves, the old one
drains and exits 0, and the pid file, the unix socket and systemd's
MAINPID name the successor. A successor that cannot load the application
is stopped, and the old process serves on. Clients under load count every
request, with connections kept alive and not."""

import os
import re
import signal
import socket
import time

import pytest
import requests

from conftest import HTTP_TIMEOUT, wait_until
from test_recycle import Load, held_streams_lose_no_frame, write_app

# What this module checks is decided in Go: it runs with one CPython (conftest.py).
pytestmark = pytest.mark.once

TOOK_OVER_RE = re.compile(r"^m0serve: SIG(?:USR2|HUP): pid (\d+) took over; pid (\d+) drains$", re.M)


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def read_pid(path):
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def took_over(server):
    """Waits for the takeover line; the successor's pid, once the old
    process has drained and exited 0."""
    wait_until(lambda: TOOK_OVER_RE.search(server.stderr), 60, lambda: f"the takeover\n{server.describe()}")
    new, drained = map(int, TOOK_OVER_RE.search(server.stderr).groups())
    assert drained == server.proc.pid and new != drained
    assert server.wait_exit(20) == 0, server.describe()  # the old one drained and went
    return new


def stop_successor(pid):
    if pid and alive(pid):
        os.kill(pid, signal.SIGTERM)
        wait_until(lambda: not alive(pid), 15, f"pid {pid} to exit")


@pytest.mark.parametrize("workers,sig", [(None, signal.SIGUSR2), (2, signal.SIGUSR2), (None, signal.SIGHUP)],
                         ids=["single", "workers", "single-sighup"])
def test_sigusr2_hands_over_without_losing_a_request(serve, tmp_path, workers, sig):
    """And SIGHUP in a single process, which has no supervisor to replace
    its workers: new code, by the same hand-over."""
    write_app(tmp_path, "v1")
    pidfile = tmp_path / "m0.pid"
    args = ["--pid", str(pidfile)] + (["--workers", str(workers)] if workers else [])
    server = serve("versioned:application", app_dir=tmp_path, args=args)
    old = server.proc.pid
    assert read_pid(pidfile) == old
    loads = [Load(server, threads=2), Load(server, threads=2, keepalive=True)]
    time.sleep(0.5)
    write_app(tmp_path, "v2")
    server.send_signal(sig)
    new = None
    try:
        new = took_over(server)
        assert f"m0serve: {sig.name}: pid {new} took over" in server.stderr
        time.sleep(0.5)
        for load in loads:
            load.stop()
        for load in loads:
            assert load.failed == [], load.failed[:3]
            versions = [v for v, _ in load.seen]
            assert versions[0] == "v1" and versions[-1] == "v2", (versions[0], versions[-1])
        assert read_pid(pidfile) == new
        assert requests.get(server.url("/"), timeout=HTTP_TIMEOUT).text.startswith("v2 ")
    finally:
        for load in loads:
            load.stop()
        stop_successor(new)
    assert not pidfile.exists()  # the successor removed its own at exit


@pytest.mark.parametrize("workers", [None, 2], ids=["single", "workers"])
def test_held_streams_lose_no_frame_across_sigusr2(serve, workers):
    """The new server numbers on in the old one's epoch, and its workers
    hold every frame the old one published, before they were ready and
    while it drained: a subscriber the old one cuts resumes on the new one
    with nothing missed and nothing twice."""
    args = ["--realtime", "--replay-frames", "4096"] + (["--workers", str(workers)] if workers else [])
    server = serve("prefork_app:application", args=args)
    new = []

    def change():
        time.sleep(1)
        server.send_signal(signal.SIGUSR2)
        new.append(took_over(server))
        assert "journals of the server it replaces" not in server.stderr, server.describe()

    try:
        held_streams_lose_no_frame(server, change)
    finally:
        stop_successor(new[0] if new else None)


def test_sigusr2_on_a_unix_socket_and_under_systemd(serve, tmp_path):
    """The socket file stays for the successor, which removes it at exit;
    sd_notify reports the successor's pid as MAINPID."""
    notify_path = str(tmp_path / "notify.sock")
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(notify_path)
    notify.settimeout(0.2)
    messages = []

    def drain():
        while True:
            try:
                messages.append(notify.recv(4096).decode())
            except TimeoutError:
                return

    sock = tmp_path / "m0.sock"
    server = serve("prefork_app:application", places=["--bind", f"unix:{sock}"], wait=False,
                   env={"NOTIFY_SOCKET": notify_path})
    wait_until(lambda: drain() or any("READY=1" in m for m in messages), 30, lambda: f"READY=1\n{server.describe()}")
    server.send_signal(signal.SIGUSR2)
    new = None
    try:
        new = took_over(server)
        wait_until(lambda: drain() or any(f"MAINPID={new}" in m for m in messages), 10, lambda: f"MAINPID\n{messages}")
        # The old process does not say STOPPING=1: the service goes on.
        assert not any("STOPPING=1" in m for m in messages), messages
        assert sock.exists()
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(str(sock))
        c.sendall(b"GET /pid HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        reply = b""
        while chunk := c.recv(65536):
            reply += chunk
        c.close()
        assert reply.startswith(b"HTTP/1.1 200") and f'"pid": {new}'.encode() in reply, reply[:300]
    finally:
        stop_successor(new)
        notify.close()
    assert not sock.exists()


@pytest.mark.each_version  # the interpreter's import failure
def test_a_successor_that_cannot_load_leaves_the_old_serving(serve, tmp_path):
    write_app(tmp_path, "v1")
    server = serve("versioned:application", app_dir=tmp_path)
    (tmp_path / "versioned.py").write_text("raise ImportError('broken deploy')\n")
    server.send_signal(signal.SIGUSR2)
    wait_until(lambda: "SIGUSR2: the new process did not take over" in server.stderr, 60,
               lambda: f"the refusal\n{server.describe()}")
    assert re.search(rf"^m0serve: SIGUSR2: the new process did not take over \(.*\); pid {server.proc.pid} serves on$",
                     server.stderr, re.M), server.stderr
    assert "broken deploy" in server.stderr  # the successor said why, once
    assert requests.get(server.url("/"), timeout=HTTP_TIMEOUT).text.startswith("v1 ")


def test_sigusr2_for_a_go_program_on_the_host(serve):
    """tests/e2e/nethost, a Go program on the public host (net/http): the
    same hand-over, the same lines."""
    from conftest import FRONT_ENDS, serve_on
    assert "nethttp" in FRONT_ENDS
    server = serve_on(serve, "nethttp", "prefork_app:application")
    old = requests.get(server.url("/pid"), timeout=HTTP_TIMEOUT).json()["pid"]
    load = Load(server, path="/pid", threads=2, keepalive=True)
    time.sleep(0.3)
    server.send_signal(signal.SIGUSR2)
    new = None
    try:
        new = took_over(server)
        load.stop()
        assert load.failed == [], load.failed[:3]
        assert requests.get(server.url("/pid"), timeout=HTTP_TIMEOUT).json()["pid"] == new != old
    finally:
        load.stop()
        stop_successor(new)
