"""Faults, slow clients and exhaustion, at a small scale and deterministic:
what a fault may cost is counted exactly, and nothing else may fail.
bench/soak measures the same at scale (bench/results/reliability-*.md).

Already covered elsewhere, and not repeated here: kill -9 of a worker
under load (test_prefork.test_kill9_worker_under_load), SIGTERM with
requests in flight and a view past the drain bound (test_signals), a
client that stops reading (test_limits), a client that leaves a stream
(test_streaming)."""

import concurrent.futures
import http.client
import re
import signal
import socket
import stat
import threading
import time
from pathlib import Path

import pytest

from conftest import HOST, HTTP_TIMEOUT, M0SERVE, STOP_TIMEOUT, RawReader, http_request, read_response, wait_until, children_of

SPECS = {"wsgi": "reliability_app:application", "asgi": "reliability_app:asgi"}
RETRY_LINE = "cannot accept a connection; retrying"


def rss_kib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


def get_on(conn, path):
    """GET path on an http.client connection: (status, body)."""
    conn.request("GET", path)
    r = conn.getresponse()
    return r.status, r.read()


def counts(server):
    return server.get_json("/counts")


def closed_count(server, stream_id):
    return counts(server)["closed"].get(stream_id, 0)


class Background:
    """GET /hello in a loop on `conns` keep-alive connections until stopped;
    every answer that is not 200 "Hello, World!" is kept, with the error."""

    def __init__(self, server, conns=2):
        self.server = server
        self.stop = threading.Event()
        self.ok = 0
        self.failures = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(conns)]

    def __enter__(self):
        for t in self.threads:
            t.start()
        wait_until(lambda: self.ok >= len(self.threads), 10, "the background requests to begin")
        return self

    def run(self):
        c = http.client.HTTPConnection(HOST, self.server.port, timeout=HTTP_TIMEOUT)
        try:
            while not self.stop.is_set():
                try:
                    status, body = get_on(c, "/hello")
                    good = status == 200 and body == b"Hello, World!\n"
                    with self.lock:
                        if good:
                            self.ok += 1
                        else:
                            self.failures.append((status, body[:200]))
                except (OSError, http.client.HTTPException) as e:
                    with self.lock:
                        self.failures.append(repr(e))
                    c.close()
        finally:
            c.close()

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(HTTP_TIMEOUT + 5)


# --------------------------------------------------------------------------
# an application that raises on every tenth request


@pytest.mark.parametrize("protocol", ["wsgi", "asgi"])
def test_every_tenth_raise_is_one_500_and_one_record(serve, protocol):
    """200 requests on 4 connections at once: exactly the 20 the
    application raised on are 500, each logged once, and the connections
    keep serving."""
    server = serve(SPECS[protocol])
    mark = server.mark()

    def load(_):
        c = http.client.HTTPConnection(HOST, server.port, timeout=HTTP_TIMEOUT)
        try:
            return [get_on(c, "/tenth") for _ in range(50)]
        finally:
            c.close()

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        answers = [a for part in pool.map(load, range(4)) for a in part]
    statuses = sorted(s for s, _ in answers)
    assert statuses == [200] * 180 + [500] * 20, statuses
    calls = sorted(int(b.split()[1]) for s, b in answers if s == 200)
    assert calls == [n for n in range(1, 201) if n % 10], "the 200s are the calls that did not raise"
    server.wait_for_record(f"{protocol}: application error", since=mark)
    wait_until(lambda: len(server.records(mark)) >= 20, 5, lambda: f"20 records\n{server.stderr_since(mark)[-3000:]}")
    records = server.records(mark)
    assert len(records) == 20, "\n".join(records)
    raised = sorted(int(m.group(1)) for r in records if (m := re.search(r'error="RuntimeError: tenth (\d+)"', r)))
    assert raised == list(range(10, 201, 10)), records
    assert all("Traceback" in r for r in records), records
    assert server.get("/hello").text == "Hello, World!\n"


# --------------------------------------------------------------------------
# clients that leave mid upload and mid download


@pytest.mark.parametrize("protocol", ["wsgi", "asgi"])
def test_leaving_mid_upload_and_mid_download_costs_no_other_request(serve, protocol):
    """20 clients leave halfway through a 1 MiB upload (half with a reset,
    half with a FIN) and 20 after 256 KiB of a 100 MiB download, while
    requests run on two other connections: none of those fails, every
    download left has its body closed, and the server logs nothing."""
    server = serve(SPECS[protocol])
    mark = server.mark()

    def upload(i):
        with server.connect() as s:
            s.sendall(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n" + b"u" * (512 << 10))
            if i % 2:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")

    def download(i):
        with server.connect() as s:
            s.sendall(http_request("GET", "/bytes?n=104857600&id=left", server.port))
            got = RawReader(s).read_exact(256 << 10)
            assert len(got) == 256 << 10, f"download {i} got {len(got)} bytes"
            if i % 2:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")

    with Background(server) as bg, concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(upload, range(20)))
        list(pool.map(download, range(20)))
        wait_until(lambda: closed_count(server, "left") >= 20, 10,
                   lambda: f"20 downloads closed, {closed_count(server, 'left')} so far")
    assert bg.failures == [], bg.failures
    assert closed_count(server, "left") == 20
    # The uploads never reached the application.
    assert counts(server)["calls"].get("/upload", 0) == 0
    assert server.records(mark) == [], server.stderr_since(mark)
    assert server.get("/hello").text == "Hello, World!\n"


# --------------------------------------------------------------------------
# slow clients held while others are served


def test_slow_clients_held_while_requests_are_served(serve):
    """100 connections sending headers a byte at a time, 100 sending a body
    a byte at a time, 100 that never read a 1 MiB answer: all held open
    while 200 requests on other connections all succeed. The bounds on
    slow headers, bodies and sends are raised to 5 minutes, so that none
    is reached however slowly the test runs."""
    server = serve(SPECS["wsgi"], args=["--idle-timeout", "300", "--body-timeout", "300"])
    slow = {"headers": [], "body": [], "never-reads": []}
    firsts = {
        "headers": b"GET /hello HTTP/1.1\r\nHost: x\r\nX-Slow: ",
        "body": b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nb",
        "never-reads": b"GET /big?n=1048576 HTTP/1.1\r\nHost: x\r\n\r\n",
    }
    try:
        for kind, first in firsts.items():
            for _ in range(100):
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                s.settimeout(HTTP_TIMEOUT)
                s.connect((HOST, server.port))
                s.sendall(first)
                slow[kind].append(s)
        wait_until(lambda: counts(server)["calls"].get("/big", 0) == 100, 10, "the 100 never-readers' views to run")

        def requests_on_one_connection(_):
            c = http.client.HTTPConnection(HOST, server.port, timeout=HTTP_TIMEOUT)
            try:
                out = []
                for _ in range(50):
                    out.append(get_on(c, "/hello"))
                    for kind in ("headers", "body"):  # another byte from each slow client
                        for s in slow[kind]:
                            s.sendall(b"a")
                return out
            finally:
                c.close()

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            answers = [a for part in pool.map(requests_on_one_connection, range(4)) for a in part]
        assert answers == [(200, b"Hello, World!\n")] * 200
        # None of the slow connections was closed by the server.
        for kind, socks in slow.items():
            for s in socks:
                s.setblocking(False)
                try:
                    data = s.recv(1)
                except BlockingIOError:
                    continue  # open, nothing to read
                assert kind == "never-reads" and data == b"H", f"a {kind} connection was closed ({data!r})"
        # The slow uploads never reached the application.
        assert counts(server)["calls"].get("/upload", 0) == 0
    finally:
        for socks in slow.values():
            for s in socks:
                s.close()


# --------------------------------------------------------------------------
# out of descriptors


def closed_by_peer(s):
    """Whether the peer closed s (it sent nothing on it)."""
    s.setblocking(False)
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        s.setblocking(True)


def descriptors(pid):
    """How many descriptors pid and each of its children have open."""
    out = {}
    for p in [pid] + sorted(children_of(pid)):
        try:
            out[p] = len(list(Path(f"/proc/{p}/fd").iterdir()))
        except FileNotFoundError:
            pass
    return out


@pytest.fixture
def limited_binary(tmp_path):
    """m0serve run under prlimit with a hard RLIMIT_NOFILE of 128 (Go
    raises the soft limit to the hard one)."""
    script = tmp_path / "m0serve-nofile"
    script.write_text(f'#!/bin/sh\nexec prlimit --nofile=128:128 "{M0SERVE}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


@pytest.mark.parametrize("workers", [1, 2])
def test_out_of_descriptors_retries_then_recovers(serve, limited_binary, workers):
    """300 idle connections exhaust the descriptors: the server stays up,
    serves the kept-alive connection it holds, logs the failed accepts at
    most once a second, closes none of the connections (those it has no
    descriptor for wait in the listener's queue), and serves a new
    connection once they close."""
    args = ["--workers", "2"] if workers > 1 else []
    server = serve(SPECS["wsgi"], binary=limited_binary, args=args)
    if workers > 1:
        wait_until(lambda: server.stdout.count("🔥 m0serve:") == 2, 20, lambda: f"2 banners\n{server.describe()}")
    mark = server.mark()
    kept = http.client.HTTPConnection(HOST, server.port, timeout=HTTP_TIMEOUT)
    held = []
    try:
        assert get_on(kept, "/hello") == (200, b"Hello, World!\n")
        began = time.monotonic()
        for _ in range(300):
            held.append(socket.create_connection((HOST, server.port), timeout=HTTP_TIMEOUT))
        wait_until(lambda: RETRY_LINE in server.stderr_since(mark), 10,
                   lambda: f"{RETRY_LINE!r}; descriptors open {descriptors(server.proc.pid)}\n{server.describe()}")
        time.sleep(2)  # exhausted for a while
        assert server.running, server.describe()
        assert get_on(kept, "/hello") == (200, b"Hello, World!\n")
        lines = [line for line in server.stderr_since(mark).splitlines() if RETRY_LINE in line]
        elapsed = time.monotonic() - began
        # One line a second at most, from each process that accepts.
        assert len(lines) <= workers * (int(elapsed) + 1), (elapsed, lines)
        assert all("too many open files" in line and re.search(r"failures=\d+", line) for line in lines), lines
        # None was lost: every connection the server took is open, and
        # the rest wait in the listener's queue (with --workers, one handed
        # to a sibling out of descriptors would be closed unanswered).
        assert "lost a connection" not in server.stderr_since(mark), server.describe()
        closed = [i for i, s in enumerate(held) if closed_by_peer(s)]
        assert not closed, (f"{len(closed)} of {len(held)} connections closed by the server", server.describe())
    finally:
        for s in held:
            s.close()
        kept.close()

    def served():
        try:
            with socket.create_connection((HOST, server.port), timeout=2) as s:
                s.sendall(http_request("GET", "/hello", server.port))
                return read_response(RawReader(s, 2)).status == 200
        except OSError:
            return False

    wait_until(served, 15, lambda: f"a request served after the connections closed\n{server.describe()}", interval=0.2)


# --------------------------------------------------------------------------
# a huge streamed response


@pytest.mark.parametrize("protocol", ["wsgi", "asgi"])
def test_huge_stream_to_a_reader_that_never_reads_is_bounded(serve, protocol):
    """1 GiB streamed to a client that never reads: the server's RSS grows by
    far less than the body while the send is stalled, and the stream's body
    is closed once the client leaves. (bench/soak's huge suite reads it
    whole too.)"""
    server = serve(SPECS[protocol])
    assert server.get("/hello").status_code == 200
    pid = server.proc.pid
    before = rss_kib(pid)
    peak = before
    with server.connect() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(http_request("GET", "/bytes?n=1073741824&id=never", server.port))
        wait_until(lambda: counts(server)["calls"].get("/bytes", 0) == 1, 10, "the stream to begin")
        for _ in range(20):  # two seconds of a stalled send
            peak = max(peak, rss_kib(pid))
            time.sleep(0.1)
    growth_mib = (peak - before) / 1024
    assert growth_mib < 200, f"RSS grew by {growth_mib:.0f} MiB for a 1 GiB body"
    wait_until(lambda: closed_count(server, "never") == 1, 10, "the body closed after the client left")
    assert server.get("/hello").text == "Hello, World!\n"


# --------------------------------------------------------------------------
# the drain tells a kept-alive client the connection ends


def test_response_finished_during_the_drain_says_connection_close(serve):
    """A response finished during the drain says Connection: close, so a
    kept-alive client does not send its next request on a connection that
    is closing."""
    server = serve(SPECS["wsgi"])
    with server.connect() as s:
        s.sendall(http_request("GET", "/sleep?s=1", server.port))
        wait_until(lambda: counts(server)["calls"].get("/sleep", 0) == 1, 5, "the view to start")
        server.send_signal(signal.SIGTERM)
        resp = read_response(RawReader(s))
    assert server.wait_exit(STOP_TIMEOUT) == 0, server.describe()
    assert resp.status == 200 and resp.body == b"slept\n", resp
    assert (resp.header("Connection") or "").lower() == "close", resp.headers
