"""Replacing workers while they serve: SIGHUP (every worker, one at a time,
the application loaded anew), --max-requests with its jitter,
--workers-lifetime and --workers-max-rss. A successor loads the application
before the worker it replaces drains, so that under a steady load every
request is answered: the tests count them. Clients open a connection per
request here (Connection: close)."""

import re
import signal
import threading
import time

import pytest
import requests

from conftest import HTTP_TIMEOUT, wait_until

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

    def __init__(self, server, threads=4, path="/"):
        self.url = server.url(path)
        self.ok, self.failed, self.seen = 0, [], []
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]
        for t in self.threads:
            t.start()

    def _run(self):
        while not self.done.is_set():
            try:
                r = requests.get(self.url, timeout=HTTP_TIMEOUT, headers={"Connection": "close"})
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


@pytest.mark.parametrize("workers", [1, 2])
def test_sighup_replaces_every_worker_with_new_code(serve, tmp_path, workers):
    write_app(tmp_path, "v1")
    server = serve("versioned:application", app_dir=tmp_path, args=["--workers", str(workers)])
    load = Load(server)
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


def test_max_requests_with_jitter(serve, tmp_path):
    write_app(tmp_path, "v1")
    server = serve("versioned:application", app_dir=tmp_path,
                   args=["--workers", "2", "--max-requests", "100", "--max-requests-jitter", "20"])
    load = Load(server)
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
