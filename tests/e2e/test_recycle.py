"""Replacing workers while they serve: SIGHUP (every worker, one at a time,
the application loaded anew), --max-requests with its jitter,
--workers-lifetime and --workers-max-rss. A successor loads the application
before the worker it replaces drains, so that under a steady load every
request is answered: the tests count them, with clients that open a
connection per request (Connection: close) and clients that keep theirs
alive: a worker being replaced answers each kept-alive connection's next
request with Connection: close, and closes none under a request."""

import re
import signal
import threading
import time

import pytest
import requests

from conftest import HTTP_TIMEOUT, wait_until
from test_realtime import SSE

# What this module checks is decided in Go: it runs with one CPython (conftest.py).
pytestmark = pytest.mark.once

REPLACING_RE = re.compile(r"^m0serve: replacing worker (\d+) \(pid (\d+)\): (.*)$", re.M)
REPLACED_RE = re.compile(r"^m0serve: worker (\d+) replaced: pid (\d+) serves in place of pid (\d+)$", re.M)

VERSIONED = '''
import os, time
VERSION = {version!r}
def application(environ, start_response):
    if environ["PATH_INFO"] == "/grow":
        global HOARD
        HOARD = bytearray(256 << 20)  # 256 MiB, touched
        for i in range(0, len(HOARD), 4096):
            HOARD[i] = 1
    body = ("%s %d\\n" % (VERSION, os.getpid())).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
'''


def write_app(directory, version):
    (directory / "versioned.py").write_text(VERSIONED.format(version=version))


class Load:
    """A steady load: threads each sending one request after another, a new
    connection for each; every answer is recorded, and every failure."""

    def __init__(self, server, threads=4, path="/", keepalive=False):
        self.url = server.url(path)
        self.keepalive = keepalive
        self.ok, self.failed, self.seen = 0, [], []
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]
        for t in self.threads:
            t.start()

    def _run(self):
        session = requests.Session()
        headers = {} if self.keepalive else {"Connection": "close"}
        while not self.done.is_set():
            try:
                r = session.get(self.url, timeout=HTTP_TIMEOUT, headers=headers)
                r.raise_for_status()
            except requests.RequestException as exc:
                with self.lock:
                    self.failed.append(repr(exc))
                continue
            with self.lock:
                self.ok += 1
                self.seen.append(r.text.split())

    def stop(self):
        self.done.set()
        for t in self.threads:
            t.join(timeout=30)
        return self


def replaced(server):
    return REPLACED_RE.findall(server.stderr)


@pytest.mark.parametrize("keepalive", [False, True], ids=["close", "keepalive"])
@pytest.mark.parametrize("workers", [1, 2])
def test_sighup_replaces_every_worker_with_new_code(serve, tmp_path, workers, keepalive):
    write_app(tmp_path, "v1")
    server = serve("versioned:application", app_dir=tmp_path, args=["--workers", str(workers)])
    load = Load(server, keepalive=keepalive)
    time.sleep(0.5)
    write_app(tmp_path, "v2")
    server.send_signal(signal.SIGHUP)
    wait_until(lambda: len(replaced(server)) == workers, 60, lambda: f"{workers} replacements\n{server.describe()}")
    time.sleep(0.5)
    load.stop()
    assert load.failed == [], load.failed[:3]
    versions = [v for v, _ in load.seen]
    assert versions[0] == "v1" and versions[-1] == "v2", (versions[0], versions[-1])
    # The replacements went one at a time, each worker once.
    assert sorted(int(w) for w, _, _ in replaced(server)) == list(range(workers))
    assert [why for _, _, why in REPLACING_RE.findall(server.stderr)] == ["SIGHUP"] * workers
    assert load.ok > 50


@pytest.mark.parametrize("keepalive", [False, True], ids=["close", "keepalive"])
def test_max_requests_with_jitter(serve, tmp_path, keepalive):
    write_app(tmp_path, "v1")
    server = serve("versioned:application", app_dir=tmp_path,
                   args=["--workers", "2", "--max-requests", "100", "--max-requests-jitter", "20"])
    load = Load(server, keepalive=keepalive)
    wait_until(lambda: len(replaced(server)) >= 4, 60, lambda: f"four replacements\n{server.describe()}")
    load.stop()
    assert load.failed == [], load.failed[:3]
    whys = {why for _, _, why in REPLACING_RE.findall(server.stderr)}
    counts = {int(m) for m in re.findall(r"it has served (\d+) requests \(--max-requests\)", " ".join(whys))}
    assert counts and all(100 <= n <= 120 for n in counts), whys
    assert len({pid for _, pid in load.seen}) >= 4


def test_lifetime_of_a_single_worker(serve, tmp_path):
    """--workers-lifetime alone runs one worker under a supervisor, which
    replaces it as it ages; nothing is refused meanwhile."""
    write_app(tmp_path, "v1")
    server = serve("versioned:application", app_dir=tmp_path, args=["--workers-lifetime", "2"])
    assert "workers=1" in server.ready_line
    load = Load(server)
    wait_until(lambda: len(replaced(server)) >= 2, 60, lambda: f"two replacements\n{server.describe()}")
    load.stop()
    assert load.failed == [], load.failed[:3]
    assert "(--workers-lifetime)" in server.stderr
    assert len({pid for _, pid in load.seen}) >= 3


def test_max_rss(serve, tmp_path):
    write_app(tmp_path, "v1")
    server = serve("versioned:application", app_dir=tmp_path, args=["--workers", "2", "--workers-max-rss", "160"])
    before = {requests.get(server.url("/"), timeout=HTTP_TIMEOUT).text.split()[1] for _ in range(10)}
    grown = requests.get(server.url("/grow"), timeout=HTTP_TIMEOUT).text.split()[1]
    wait_until(lambda: REPLACING_RE.search(server.stderr), 20, lambda: f"a replacement\n{server.describe()}")
    (slot, pid, why), = REPLACING_RE.findall(server.stderr)[:1]
    assert pid == grown and "over 160 MiB (--workers-max-rss)" in why, why
    wait_until(lambda: replaced(server), 30, "the replacement to serve")
    assert before  # the workers served before


class Subscriber:
    """A held SSE stream read as a browser's EventSource reads it: on its
    end it reconnects with the last id it saw (Last-Event-ID), after the
    server's retry: (at most 500 ms here). Records the ids of the frames in
    the order they arrived, and every gap the server reported."""

    def __init__(self, server, channel):
        self.server, self.path = server, f"/hold?c={channel}"
        self.ids, self.gaps, self.others, self.errors, self.connects = [], [], [], [], 0
        self.last = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        retry = 0.05
        while not self.done.is_set():
            try:
                s = SSE(self.server, self.path, last_id=self.last)
            except (OSError, AssertionError) as exc:
                self.errors.append(repr(exc))
                time.sleep(retry)
                continue
            self.connects += 1
            try:
                if s.status != 200:
                    self.errors.append(f"status {s.status}")
                while not self.done.is_set():
                    b = s.next(timeout=0.5)
                    if b is None:
                        if s.reader.eof or s.ended or s.reader.reset:
                            break
                        continue
                    if "retry" in b:
                        retry = min(int(b["retry"]) / 1000, 0.5)
                    if b.get("event") == "m0-gap":
                        self.gaps.append(b)
                    elif b.get("data") is not None and "id" not in b:
                        self.others.append(b)
                    elif b.get("data") is not None and b.get("event") != "m0-position":
                        self.ids.append(b["id"])
                        self.last = b["id"]
                    elif b.get("id"):
                        self.last = b["id"]
            finally:
                s.close()
            time.sleep(retry)

    def stop(self):
        self.done.set()
        self.thread.join(timeout=30)


def held_streams_lose_no_frame(server, change):
    """Twelve subscribers held while a publisher sends a frame every 10 ms
    and change() replaces what holds them: each subscriber is cut at its
    process's drain, reconnects with its last id and is replayed what it
    missed by the process it lands on, so that it receives every frame
    once, in order. Every publish is answered."""
    from test_prefork import seq_of
    subs = [Subscriber(server, "recycle") for _ in range(12)]
    wait_until(lambda: all(s.connects for s in subs), 20, "every subscriber connected")
    published, failed = [], []
    stop = threading.Event()

    def publish():
        session = requests.Session()
        i = 0
        while not stop.is_set():
            try:
                r = session.post(server.url("/publish?c=recycle"), data=f"frame {i}", timeout=HTTP_TIMEOUT)
                r.raise_for_status()
                published.append(r.json()["id"])
            except requests.RequestException as exc:
                failed.append(repr(exc))
            i += 1
            time.sleep(0.01)

    publisher = threading.Thread(target=publish, daemon=True)
    publisher.start()
    try:
        change()
        time.sleep(1)
    finally:
        stop.set()
        publisher.join(timeout=30)
    assert failed == [], failed[:3]
    assert len(published) > 100
    want = sorted(published, key=seq_of)
    assert want == published  # one publisher: its ids rise
    wait_until(lambda: all(s.last == want[-1] for s in subs), 20,
               lambda: f"every subscriber at {want[-1]}: {[s.last for s in subs]}")
    for s in subs:
        s.stop()
    for k, s in enumerate(subs):
        assert s.gaps == [], (k, s.gaps[:3])
        assert s.others == [], (k, s.others[:3])
        first = want.index(s.ids[0])  # a subscriber sees from where it joined
        assert s.ids == want[first:], (k, len(s.ids), len(want) - first, s.errors[:3])
        assert first == 0, (k, "missed the first frames", s.ids[:3], want[:3])
    assert sum(s.connects for s in subs) > len(subs)  # they were cut, and came back


@pytest.mark.parametrize("how", ["sighup", "max-requests"])
def test_held_streams_lose_no_frame_while_workers_are_replaced(serve, how):
    """On two workers, replaced under the subscribers by SIGHUP twice, or
    by --max-requests."""
    args = ["--workers", "2", "--realtime", "--replay-frames", "4096"]
    if how == "max-requests":
        args += ["--max-requests", "300"]
    server = serve("prefork_app:application", args=args)

    def change():
        if how == "sighup":
            for n in (2, 4):
                time.sleep(1)
                server.send_signal(signal.SIGHUP)
                wait_until(lambda: len(replaced(server)) >= n, 60, lambda: f"{n} replacements\n{server.describe()}")
        else:
            wait_until(lambda: len(replaced(server)) >= 3, 60, lambda: f"three replacements\n{server.describe()}")

    held_streams_lose_no_frame(server, change)


SCALE_RE = re.compile(r"^m0serve: SIGTT(IN|OU): worker (\d+) \(pid (\d+)\) (added|drains); (\d+) workers$", re.M)


def test_sigttin_and_sigttou(serve, tmp_path):
    """SIGTTIN adds a worker, SIGTTOU drains the last (never the only
    one), under a load of kept-alive clients that lose no request."""
    write_app(tmp_path, "v1")
    server = serve("versioned:application", app_dir=tmp_path, args=["--workers", "2"])
    load = Load(server, keepalive=False)
    kept = Load(server, threads=2, keepalive=True)
    server.send_signal(signal.SIGTTIN)
    wait_until(lambda: ("IN", "2") in [(k, w) for k, w, _, _, _ in SCALE_RE.findall(server.stderr)], 30,
               lambda: f"worker 2\n{server.describe()}")
    added = next(int(p) for k, w, p, _, _ in SCALE_RE.findall(server.stderr) if k == "IN")
    wait_until(lambda: str(added) in {pid for _, pid in load.seen}, 30, "the added worker to serve")
    for _ in range(3):
        server.send_signal(signal.SIGTTOU)
        time.sleep(0.5)
    wait_until(lambda: "one worker left, which serves on" in server.stderr, 30, lambda: server.describe())
    mark = len(load.seen)
    time.sleep(1)
    load.stop()
    kept.stop()
    assert load.failed == [] and kept.failed == [], (load.failed[:3], kept.failed[:3])
    assert [(k, w, n) for k, w, _, _, n in SCALE_RE.findall(server.stderr)] == \
        [("IN", "2", "3"), ("OU", "2", "2"), ("OU", "1", "1")], server.stderr
    assert len({pid for _, pid in load.seen[mark + 20:]}) == 1  # one worker serves at the end


def test_sigttin_in_a_single_process(serve):
    server = serve("prefork_app:application")
    server.send_signal(signal.SIGTTIN)
    wait_until(lambda: "SIGTTIN: a single process has no workers to add or drain" in server.stderr, 10,
               lambda: server.describe())
    assert requests.get(server.url("/pid"), timeout=HTTP_TIMEOUT).status_code == 200
