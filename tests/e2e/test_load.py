"""Load beyond capacity: --limit-concurrency (uvicorn's) answers 503 with
Retry-After past N requests in flight in a worker, before Python, and held
streams do not count against it; --max-queue-wait (FrankenPHP's
max_wait_time) answers 503 a request that has waited that long for a
Python thread. Both on fasthttp (m0serve) and on net/http (a Go program on
the public host, tests/e2e/nethost), and the metrics count what was
refused and why."""

import concurrent.futures
import contextlib
import os
import re
import subprocess
import threading
import time

import pytest
import requests
from websockets.sync.client import connect as ws_connect

from conftest import FREE_THREADED, FRONT_ENDS, HTTP_TIMEOUT, serve_on, wait_until
from test_realtime import SSE

SPEC = "prefork_app:application"


def metric(server, name, labels=""):
    text = requests.get(server.url("/__metrics"), timeout=HTTP_TIMEOUT).text
    m = re.search(rf"^{re.escape(name)}{re.escape(labels)} (\S+)$", text, re.M)
    assert m, f"{name}{labels} not in\n{text[:4000]}"
    return float(m.group(1))


def burst(server, n, path):
    """n requests at once, each on its own connection: their answers."""
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        return list(pool.map(lambda _: requests.get(server.url(path), timeout=HTTP_TIMEOUT), range(n)))


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_limit_concurrency(serve, front_end):
    server = serve_on(serve, front_end, SPEC, args=["--limit-concurrency", "2", "--blocking-threads", "4", "--metrics"])
    answers = burst(server, 5, "/sleep?s=1")
    codes = sorted(r.status_code for r in answers)
    assert codes == [200, 200, 503, 503, 503], codes
    refused = [r for r in answers if r.status_code == 503]
    assert all(r.headers["Retry-After"] == "1" for r in refused), [r.headers for r in refused]
    # Answered before Python: at once, not after the second the others slept.
    assert all(r.elapsed.total_seconds() < 0.5 for r in refused), [r.elapsed for r in refused]
    assert "Connection" not in refused[0].headers or refused[0].headers["Connection"].lower() != "close"
    assert requests.get(server.url("/pid"), timeout=HTTP_TIMEOUT).status_code == 200  # the bound is free again
    assert metric(server, "m0_requests_refused_total", '{reason="limit-concurrency"}') == 3
    assert "refused a request with 503: 2 requests in flight (--limit-concurrency 2)" in server.stderr
    assert server.stderr.count("--limit-concurrency 2)") == 1  # said once


def test_held_streams_do_not_count(serve):
    server = serve(SPEC, args=["--limit-concurrency", "2", "--realtime"])
    streams = [SSE(server, "/hold?c=limit") for _ in range(4)]
    assert all(s.status == 200 for s in streams), [s.status for s in streams]
    answers = burst(server, 2, "/sleep?s=0.2")
    assert [r.status_code for r in answers] == [200, 200]
    for s in streams:
        s.close()


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_max_queue_wait(serve, front_end):
    server = serve_on(serve, front_end, SPEC, args=["--blocking-threads", "1", "--max-queue-wait", "0.3", "--metrics"])
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        slow = pool.submit(requests.get, server.url("/sleep?s=1.5"), timeout=HTTP_TIMEOUT)
        time.sleep(0.2)  # the slow one holds the one thread
        began = time.monotonic()
        waited = requests.get(server.url("/pid"), timeout=HTTP_TIMEOUT)
        took = time.monotonic() - began
        assert slow.result().status_code == 200
    assert waited.status_code == 503 and waited.headers["Retry-After"] == "1", (waited.status_code, waited.headers)
    assert 0.25 < took < 1.2, took  # after the bound, before the slow one ended
    assert requests.get(server.url("/pid"), timeout=HTTP_TIMEOUT).status_code == 200
    assert metric(server, "m0_requests_refused_total", '{reason="max-queue-wait"}') == 1
    assert metric(server, "m0_pool_waits_total") >= 1
    assert metric(server, "m0_pool_wait_seconds_total") >= 0.25
    # One thread for the application; nethost's own ASGI mount runs on a
    # pool of its own under --blocking-threads.
    assert metric(server, "m0_pool_threads") == (1 if front_end == "fasthttp" else 2)


def test_pool_and_gil_metrics_under_workers(serve):
    server = serve(SPEC, args=["--workers", "2", "--blocking-threads", "2", "--metrics", "--max-requests", "50"])
    for _ in range(150):
        requests.get(server.url("/pid"), timeout=HTTP_TIMEOUT)
    wait_until(lambda: "m0serve: worker" in server.stderr and " replaced: " in server.stderr, 30, "a replacement")
    text = requests.get(server.url("/__metrics"), timeout=HTTP_TIMEOUT).text
    # Per worker, labelled; the replacements once, for the server.
    assert re.search(r'^m0_pool_threads\{worker="0"\} 2$', text, re.M), text[:3000]
    assert re.search(r'^m0_pool_threads\{worker="1"\} 2$', text, re.M), text[:3000]
    takes = [float(v) for v in re.findall(r'^m0_gil_takes_total\{worker="\d"\} (\S+)$', text, re.M)]
    assert len(takes) == 2 and all(t > 0 for t in takes), takes
    n = re.search(r'^m0_worker_replacements_total\{reason="max-requests"\} (\S+)$', text, re.M)
    assert n and float(n.group(1)) >= 1, text[-3000:]
    assert re.search(r'^m0_worker_replacements_total\{reason="sighup"\} 0$', text, re.M)


@pytest.mark.gil
def test_max_queue_wait_refused_for_asgi_on_its_loop(serve):
    server = serve("recorder:app", args=["--max-queue-wait", "1"], wait=False)
    assert server.wait_exit(30) == 78
    assert "no application here runs on a Python pool thread" in server.stderr, server.stderr


@pytest.mark.parametrize("front_end,threads", [("fasthttp", "2"), ("nethttp", "2"), ("fasthttp", "0")],
                         ids=["fasthttp", "nethttp", "one-thread"])
def test_timeout_interrupts_and_answers_504(serve, front_end, threads):
    """A request still running the application past --timeout: a line
    naming it and every Python thread's stack on stderr, the request
    interrupted and answered 504, one log line; the server serves on. The
    same on the pool and on the one dedicated thread (--blocking-threads 0)."""
    server = serve_on(serve, front_end, SPEC, args=["--timeout", "1", "--blocking-threads", threads])
    began = time.monotonic()
    r = requests.get(server.url("/spin?s=20"), timeout=HTTP_TIMEOUT)
    took = time.monotonic() - began
    assert r.status_code == 504, (r.status_code, r.text)
    assert 0.9 < took < 4, took
    wait_until(lambda: "request timed out" in server.stderr, 5, "the timeout's log line")
    err = server.stderr
    assert re.search(r"^m0serve: wsgi: python-\d has run GET /spin for \d+(\.\d)?s, past the timeout of 1s \(--timeout\)", err, re.M), err
    # faulthandler's dump: every thread, the one spinning in the view.
    dump = err[err.index("past the timeout of 1s"):]
    ident = re.search(r"its own as thread (0x[0-9a-f]{16})", dump).group(1)
    own = dump[dump.index(f"Thread {ident} (most recent call first):"):]
    assert own.splitlines()[1].strip().startswith('File "') and "prefork_app.py" in own.splitlines()[1] \
        and own.splitlines()[1].endswith("in application"), dump[:3000]
    assert err.count("past the timeout of 1s") == 1
    assert requests.get(server.url("/pid"), timeout=HTTP_TIMEOUT).status_code == 200
    # A request within the bound is untouched.
    assert requests.get(server.url("/spin?s=0.2"), timeout=HTTP_TIMEOUT).json()["spun"] is True


def test_timeout_replaces_a_worker_whose_every_thread_is_stuck(serve):
    """Threads blocked in a C call (time.sleep) hear the interrupt only when
    it returns: with every pool thread stuck, the supervisor replaces the
    worker, and the successor serves meanwhile."""
    server = serve(SPEC, args=["--workers", "1", "--timeout", "1", "--blocking-threads", "1"])
    first = requests.get(server.url("/pid"), timeout=HTTP_TIMEOUT).json()["pid"]
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        stuck = pool.submit(requests.get, server.url("/sleep?s=30"), timeout=HTTP_TIMEOUT)
        wait_until(lambda: "every Python thread has run one request for more than 1s (--timeout)" in server.stderr, 20,
                   lambda: f"the replacement\n{server.describe()}")
        wait_until(lambda: re.search(r"^m0serve: worker 0 replaced: pid \d+ serves in place of pid %d$" % first,
                                     server.stderr, re.M), 30, lambda: f"the successor\n{server.describe()}")
        assert requests.get(server.url("/pid"), timeout=HTTP_TIMEOUT).json()["pid"] != first
        try:
            stuck.result()
        except requests.RequestException:
            pass  # cut with the old worker at its drain's bound


@contextlib.contextmanager
def looping(conns, client):
    """conns threads, each calling client(stop) once, until the block ends
    and sets stop; a client's failure fails the block."""
    stop = threading.Event()
    with concurrent.futures.ThreadPoolExecutor(conns) as pool:
        running = [pool.submit(client, stop) for _ in range(conns)]
        try:
            yield
        finally:
            stop.set()
            for r in running:
                r.result()


def kept_busy(server, conns, path="/spin?s=0.005"):
    """conns clients, each asking for path on its own kept-alive connection
    again as soon as it is answered, until the block ends."""
    def client(stop):
        with requests.Session() as s:
            while not stop.is_set():
                s.get(server.url(path), timeout=HTTP_TIMEOUT)

    return looping(conns, client)


ONE_P = "one usable CPU: Go's side has one P whatever the load"
GOMAXPROCS_SET = "GOMAXPROCS is set in the environment: the process's own"


@pytest.mark.once
@pytest.mark.skipif(FREE_THREADED, reason="a free-threaded build: m0serve leaves Go's P count to the runtime")
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason=ONE_P)
@pytest.mark.skipif("GOMAXPROCS" in os.environ, reason=GOMAXPROCS_SET)
@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_go_side_on_one_p_while_python_is_the_pace(serve, front_end):
    """Under one GIL, m0serve runs Go's side on one P while more connections
    than pool threads bring requests to a busy process, and on Go's default
    while fewer do (docs/running.md, "Go's side on one P"); the Go runtime's
    own gauge under --metrics says which. Four threads (eight on nethost,
    whose own mounts have a pool of their own): one client and the gauge's
    own requests are not a queue, sixteen clients are."""
    server = serve_on(serve, front_end, SPEC, args=["--blocking-threads", "4", "--metrics"])
    procs = lambda: metric(server, "go_sched_gomaxprocs_threads")
    wait_until(lambda: procs() == 1, 10, "one P while idle, as it starts")
    with kept_busy(server, 1):  # one connection: the default
        wait_until(lambda: procs() > 1, 20, lambda: f"Go's default under one connection\n{server.describe()}")
    with kept_busy(server, 16):  # a queue for the threads: one P
        wait_until(lambda: procs() == 1, 20, lambda: f"one P under sixteen connections\n{server.describe()}")
        assert requests.get(server.url("/pid"), timeout=HTTP_TIMEOUT).status_code == 200


@contextlib.contextmanager
def loaded(server, conns, path):
    """wrk on conns connections asking for path until the block ends (it
    installs with scripts/test's Debian packages)."""
    wrk = subprocess.Popen(["wrk", "-t1", f"-c{conns}", "-d120s", server.url(path)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        wrk.terminate()
        wrk.wait(timeout=HTTP_TIMEOUT)


def echoing(server, conns):
    """conns WebSockets, each sending a message again as soon as its echo
    is back, until the block ends."""
    def client(stop):
        with ws_connect(server.url("/ws/echo").replace("http", "ws", 1), open_timeout=HTTP_TIMEOUT) as ws:
            while not stop.is_set():
                ws.send("ping")
                assert ws.recv(timeout=HTTP_TIMEOUT) == "ping"

    return looping(conns, client)


@pytest.mark.once
@pytest.mark.skipif(FREE_THREADED, reason="a free-threaded build: m0serve leaves Go's P count to the runtime")
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason=ONE_P)
@pytest.mark.skipif("GOMAXPROCS" in os.environ, reason=GOMAXPROCS_SET)
def test_go_side_on_one_p_beside_the_asgi_loop(serve, tmp_path):
    """With every application on the ASGI event loop, m0serve runs Go's side
    on one P while the loop is busy, or a few connections bring it requests,
    and on Go's default while sixteen WebSockets keep Go busier than the loop,
    or one client asks for files that Go alone answers (docs/running.md,
    "Go's side on one P"). The gauge is read twice a second: its own
    request is one connection in one look of five."""
    (tmp_path / "page.txt").write_bytes(b"x" * 1024)
    server = serve("asgi_raw:application", args=["--metrics", "--static", f"/files={tmp_path}"])
    procs = lambda: metric(server, "go_sched_gomaxprocs_threads")
    wait_until(lambda: procs() == 1, 10, "one P while idle, as it starts")
    with echoing(server, 16):
        wait_until(lambda: procs() > 1, 20, lambda: f"Go's default under WebSockets\n{server.describe()}", interval=0.5)
    with kept_busy(server, 1, "/spin?s=0.001"):
        wait_until(lambda: procs() == 1, 20, lambda: f"one P under one client\n{server.describe()}", interval=0.5)
    with loaded(server, 1, "/files/page.txt"):  # a Python client would leave Go near idle
        wait_until(lambda: procs() > 1, 20, lambda: f"Go's default under one client of files\n{server.describe()}", interval=0.5)
    with kept_busy(server, 16, "/spin?s=0.005"):
        wait_until(lambda: procs() == 1, 20, lambda: f"one P under a busy loop\n{server.describe()}", interval=0.5)
        assert requests.get(server.url("/scope"), timeout=HTTP_TIMEOUT).status_code == 200


@pytest.mark.once
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason=ONE_P)
def test_gomaxprocs_set_is_kept(serve):
    """GOMAXPROCS in the environment is the process's, as for any Go program."""
    server = serve(SPEC, args=["--blocking-threads", "4", "--metrics"], env={"GOMAXPROCS": "2"})
    with kept_busy(server, 8):
        time.sleep(1)  # ten of the looks that would narrow it
        assert metric(server, "go_sched_gomaxprocs_threads") == 2
