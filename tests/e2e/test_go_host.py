"""The Go programs on the m0 host, driven as they are: examples/go_host (a
pure-Go application with a producer) and examples/mixed (a Go handler,
Flask under /flask, FastAPI under /api, static files, and a Go clock the
Flask page shows live through a signed stream URL, in a browser)."""

import json
import os
import re
import subprocess

import pytest
import requests

from conftest import EXAMPLES, HTTP_TIMEOUT, NETHOST, READY_RE, ROOT, free_port, wait_until
from test_mounts import read_events
from test_realtime_browser import BROWSER_TIMEOUT, browser_factory  # noqa: F401 (a fixture)

GO_HOST = ROOT / ".bin" / "go_host"
MIXED = ROOT / ".bin" / "mixed"
KEY = "m" * 40


def run(binary, *args, env=None):
    return subprocess.run([str(binary), "--port", str(free_port()), *args], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL,
                          env={k: v for k, v in {**os.environ, **(env or {})}.items() if v is not None})


def test_go_host_serves_and_its_producer_publishes(serve):
    s = serve(None, binary=GO_HOST, app_dir=None, env={"M0_APP_TICK_MS": "50"})
    m = READY_RE.match(s.ready_line)
    assert m and m["spec"] == "go_host" and m["protocol"] == "go" and m["threads"] == "0", s.ready_line
    assert s.get("/hello").json() == {"hello": "world", "worker": 0, "thread": 0}
    assert "new EventSource(\"/clock\")" in s.get("/").text
    with requests.get(s.url("/clock"), stream=True, timeout=HTTP_TIMEOUT) as r:
        assert r.headers["Content-Type"] == "text/event-stream"
        events = read_events(r, 3)
    seqs = [int(e["id"].rsplit("-", 1)[1], 36) for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3, events
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:.]+Z", e["data"]) for e in events), events


def test_go_host_pool_threads(serve):
    """M0_BLOCKING_THREADS=2: /hello runs on a pool thread of its own
    handler; the stream is begun on the loop and still held."""
    s = serve(None, binary=GO_HOST, app_dir=None, env={"M0_BLOCKING_THREADS": "2", "M0_APP_TICK_MS": "50"})
    threads = {s.get("/hello").json()["thread"] for _ in range(20)}
    assert threads and threads <= {1, 2}, threads
    with requests.get(s.url("/clock"), stream=True, timeout=HTTP_TIMEOUT) as r:
        assert len(read_events(r, 1)) == 1


def test_go_host_threads(serve):
    s = serve(None, binary=GO_HOST, app_dir=None, env={"M0_THREADS": "2"})
    assert "threads=2" in s.ready_line
    workers = set()
    for _ in range(30):
        with requests.Session() as session:  # a connection each, spread over the loops
            workers.add(session.get(s.url("/hello"), timeout=HTTP_TIMEOUT).json()["worker"])
    assert workers == {0, 1}, workers


def test_go_host_doctor_and_refusals():
    proc = run(GO_HOST, "--doctor")
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert proc.returncode == 0 and report["declares"] == {"max_workers": 0, "max_threads": 0}, report
    assert report["python"] is None and report["mounts"] == []
    topo = report["topology"]
    assert topo["protocol"] == "go" and topo["blocking_threads"] == 0 and topo["front_end"] is None, topo
    # A Go application without PoolThreads has the pool given; one whose
    # PoolThreads says 0 (the net/http host, all bridges) has none, and
    # the doctor says what serving would do.
    for binary, want in ((GO_HOST, 3), (NETHOST, 0)):
        proc = run(binary, "--doctor", "--blocking-threads", "3", env={"M0_NETHOST_APP": "app:application"})
        topo = json.loads(proc.stdout.strip().splitlines()[-1])["topology"]
        assert proc.returncode == 0 and topo["blocking_threads"] == want, (binary, topo, proc.stderr)
    proc = run(GO_HOST, "app:application")
    assert proc.returncode == 2 and "takes no MODULE[:ATTR]" in proc.stderr, proc.stderr
    proc = run(GO_HOST, env={"M0_THREADS": "2", "M0_WORKERS": "2"})
    assert proc.returncode == 78 and "use one of --threads and --workers" in proc.stderr, proc.stderr


@pytest.fixture
def mixed(serve):
    return serve(None, binary=MIXED, app_dir=EXAMPLES / "mixed",
                 env={"M0_GRANT_KEY": KEY, "M0_APP_TICK_MS": "100", "M0_GRANT_COOKIE": None})


@pytest.mark.gil  # examples/mixed mounts a FastAPI application
def test_mixed_serves_every_part(mixed):
    m = READY_RE.match(mixed.ready_line)
    assert m and m["spec"] == "mixed" and m["protocol"] == "go", mixed.ready_line
    hello = mixed.get("/hello").json()
    assert hello["hello"] == "from Go", hello
    page = mixed.get("/flask/")
    assert page.status_code == 200 and 'href="/flask/about"' in page.text, page.text
    assert mixed.get("/flask/about").json() == {"served_under": "/flask", "path": "/about"}
    assert mixed.get("/api/").json() == {"items": mixed.url("/api/items/1"), "root_path": "/api"}
    assert mixed.get("/api/items/7").json() == {"n": 7}
    css = mixed.get("/static/style.css")
    assert css.status_code == 200 and css.headers["Content-Type"].startswith("text/css")
    assert mixed.get("/nothing").status_code == 404
    r = mixed.get("/", allow_redirects=False)
    assert r.status_code == 302 and r.headers["Location"] == "/flask/"


def test_mixed_refuses_without_a_grant_key():
    proc = run(MIXED, "--app-dir", str(EXAMPLES / "mixed"), env={"M0_GRANT_KEY": None})
    assert proc.returncode == 78 and "M0_GRANT_KEY is not set" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


@pytest.mark.gil  # examples/mixed mounts a FastAPI application
def test_mixed_page_shows_the_go_clock_in_a_browser(mixed, browser_factory):  # noqa: F811
    """Chromium loads the Flask page, follows the signed stream URL it
    renders to the Go hold mount, and shows the producer's clock ticking."""
    page = browser_factory(mixed.url("/flask/"))

    def clock():
        return page.evaluate("document.getElementById('clock').textContent")

    first = wait_until(lambda: (t := clock()) and re.fullmatch(r"\d\d:\d\d:\d\d\.\d{3}", t) and t, BROWSER_TIMEOUT,
                       lambda: f"the clock on the page: {clock()!r}")
    wait_until(lambda: clock() != first, BROWSER_TIMEOUT, lambda: f"the clock to move from {first}")
    # The page's EventSource is open on the signed URL the Flask view made.
    url = page.evaluate("source.url")
    assert url.startswith(mixed.url("/streams?ch=clock&")) and "&sig=" in url, url
    assert page.evaluate("source.readyState") == 1, url


@pytest.mark.gil  # examples/mixed mounts a FastAPI application
def test_mixed_under_a_go_pool(serve):
    """--blocking-threads 2: the Go handler runs on a pool thread, the
    Python mounts and the held stream on the loop (a stream begun on a pool
    thread would be refused with 409)."""
    s = serve(None, binary=MIXED, app_dir=EXAMPLES / "mixed", blocking_threads=2,
              env={"M0_GRANT_KEY": KEY, "M0_APP_TICK_MS": "100", "M0_GRANT_COOKIE": None})
    assert {s.get("/hello").json()["thread"] for _ in range(10)} <= {1, 2}
    assert s.get("/api/items/2").json() == {"n": 2}
    url = re.search(r'new EventSource\("([^"]+)"\)', s.get("/flask/").text)[1].replace("\\u0026", "&")
    with requests.get(s.url(url), stream=True, timeout=HTTP_TIMEOUT) as r:
        assert r.status_code == 200, r.text
        assert len(read_events(r, 1)) == 1
