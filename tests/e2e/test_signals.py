"""Graceful stop: SIGTERM/SIGINT let in-flight requests finish, then exit 0."""

import concurrent.futures
import re
import signal
import socket
import time

import pytest
import requests

from conftest import HTTP_TIMEOUT, STOP_TIMEOUT, wait_until


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_during_inflight_request(serve, sig):
    server = serve("pep3333:application", validated=True)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        slow = pool.submit(requests.get, server.url("/sleep?s=2"), timeout=HTTP_TIMEOUT)
        wait_until(lambda: server.get_json("/inflight")["sleep"] == 1, 5, "the slow request to start")
        server.send_signal(sig)
        r = slow.result(timeout=HTTP_TIMEOUT)
    assert r.status_code == 200 and r.text == "slept\n"
    rc = server.wait_exit(STOP_TIMEOUT)
    assert rc is not None, f"still running {STOP_TIMEOUT}s after {sig.name}\n{server.describe()}"
    assert rc == 0, server.describe()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_idle_server_exits_0(serve, sig):
    server = serve("pep3333:application", validated=True)
    assert server.get("/ok").status_code == 200
    server.send_signal(sig)
    rc = server.wait_exit(STOP_TIMEOUT)
    assert rc is not None, f"still running {STOP_TIMEOUT}s after {sig.name}\n{server.describe()}"
    assert rc == 0, server.describe()


def test_requests_waiting_for_a_thread_finish_during_drain(serve):
    """More requests than threads: the queued ones are served, not refused."""
    server = serve("pep3333:application", blocking_threads=1, validated=True)
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        slow = [pool.submit(requests.get, server.url("/sleep?s=1"), timeout=HTTP_TIMEOUT) for _ in range(3)]
        # The one thread is busy, so /inflight would queue too: give the three
        # requests a moment to arrive (on loopback they take milliseconds).
        time.sleep(0.5)
        server.send_signal(signal.SIGTERM)
        results = [f.result(timeout=HTTP_TIMEOUT) for f in slow]
    assert [r.status_code for r in results] == [200, 200, 200], [r.text for r in results]
    rc = server.wait_exit(STOP_TIMEOUT)
    assert rc == 0, server.describe()


def test_drain_is_bounded_and_names_what_still_runs(serve):
    """A view that outlasts the five-second drain: the thread is named, exit 0 anyway."""
    server = serve("pep3333:application", blocking_threads=2, validated=True)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        stuck = pool.submit(requests.get, server.url("/sleep?s=20"), timeout=30)
        wait_until(lambda: server.get_json("/inflight")["sleep"] == 1, 5, "the long request to start")
        started = time.monotonic()
        server.send_signal(signal.SIGTERM)
        rc = server.wait_exit(15)
        took = time.monotonic() - started
        try:
            stuck.result(timeout=30)
        except requests.RequestException:
            pass  # the connection went with the process
    assert rc == 0, server.describe()
    assert 4.5 <= took <= 9, f"the drain took {took:.1f}s, want about 5"
    named = re.findall(r"wsgi: (.*) still running a request", server.stderr)
    # The one busy thread, and no idle one.
    assert len(named) == 1 and re.fullmatch(r"python-\d+", named[0]), server.stderr


def test_drain_does_not_wait_for_connections_without_a_request(serve):
    """A connection that never sent a byte (a browser's preconnect) does not
    hold the drain."""
    import socket
    server = serve("pep3333:application", validated=True)
    with socket.create_connection((server.host, server.port), timeout=10):
        started = time.monotonic()
        server.send_signal(signal.SIGTERM)
        rc = server.wait_exit(15)
        took = time.monotonic() - started
    assert rc == 0, server.describe()
    assert took < 2, f"the drain waited {took:.1f}s on an unused connection"


@pytest.mark.parametrize("workers", [1, 2])
def test_a_drain_answers_every_request(serve, workers):
    """200 one-second requests on the default pool, and SIGTERM: each one
    is answered, in full or, when it had not begun by the time the drain's
    five-second bound would cut it, 503 with Retry-After and Connection:
    close; none is closed unanswered."""
    server = serve("pep3333:application", args=["--workers", str(workers)], validated=True)
    n = 200

    def one(_):
        try:
            r = requests.get(server.url("/sleep?s=1"), timeout=30, headers={"Connection": "close"})
        except requests.RequestException as exc:  # closed with no answer
            return ("unanswered", repr(exc))
        if r.status_code == 503:
            assert r.headers.get("Retry-After") == "1" and r.headers.get("Connection") == "close", r.headers
            return ("503", None)
        assert r.status_code == 200 and r.text == "slept\n", (r.status_code, r.text)
        return ("200", None)

    with concurrent.futures.ThreadPoolExecutor(max_workers=n) as pool:
        futures = [pool.submit(one, i) for i in range(n)]
        time.sleep(1.5)  # every request has arrived and waits for a thread, or runs
        started = time.monotonic()
        server.send_signal(signal.SIGTERM)
        results = [f.result(timeout=60) for f in futures]
    took = time.monotonic() - started
    kinds = {k: sum(1 for r in results if r[0] == k) for k in ("200", "503", "unanswered")}
    assert kinds["unanswered"] == 0, [r for r in results if r[0] == "unanswered"][:3]
    assert kinds["200"] >= 10 and kinds["503"] > 0, kinds
    assert server.wait_exit(STOP_TIMEOUT) == 0, server.describe()
    assert took < 8, f"the drain took {took:.1f}s"


def test_a_replacement_answers_every_request(serve):
    """The same 200 one-second requests on two workers, and SIGHUP: each
    worker drains in turn while its successor serves, and every request is
    answered, in full or 503 with Retry-After; none is closed unanswered."""
    server = serve("pep3333:application", args=["--workers", "2"], validated=True)
    n = 200

    def one(_):
        try:
            r = requests.get(server.url("/sleep?s=1"), timeout=60, headers={"Connection": "close"})
        except requests.RequestException as exc:
            return ("unanswered", repr(exc))
        if r.status_code == 503:
            assert r.headers.get("Retry-After") == "1", r.headers
            return ("503", None)
        assert r.status_code == 200 and r.text == "slept\n", (r.status_code, r.text)
        return ("200", None)

    with concurrent.futures.ThreadPoolExecutor(max_workers=n) as pool:
        futures = [pool.submit(one, i) for i in range(n)]
        time.sleep(1.5)
        server.send_signal(signal.SIGHUP)
        results = [f.result(timeout=120) for f in futures]
    kinds = {k: sum(1 for r in results if r[0] == k) for k in ("200", "503", "unanswered")}
    assert kinds["unanswered"] == 0, [r for r in results if r[0] == "unanswered"][:3]
    assert kinds["200"] >= 20, kinds
    wait_until(lambda: len(re.findall(r"^m0serve: worker \d replaced: ", server.stderr, re.M)) == 2, 60,
               lambda: server.describe())


@pytest.mark.parametrize("workers", [None, 2], ids=["single", "workers"])
def test_a_drain_refuses_new_connections_at_once(serve, workers):
    """Once SIGTERM's drain begins, while a request still runs, a new
    connection is refused (nothing listens), not queued for a process that
    will not serve it: the copies of the sockets kept for SIGUSR2 close
    with the rest."""
    args = ["--workers", str(workers)] if workers else []
    server = serve("pep3333:application", args=args, validated=True)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        slow = pool.submit(requests.get, server.url("/sleep?s=2"), timeout=30)
        time.sleep(0.5)
        server.send_signal(signal.SIGTERM)
        time.sleep(0.7)  # the drain has begun; the slow request runs on
        assert server.proc.poll() is None
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", server.port), timeout=HTTP_TIMEOUT).close()
        assert slow.result().status_code == 200
    assert server.wait_exit(STOP_TIMEOUT) == 0
