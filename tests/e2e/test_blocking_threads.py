"""--blocking-threads: slow views must not block other requests."""

import concurrent.futures
import time

import requests

from conftest import HTTP_TIMEOUT, READY_RE, wait_until


def inflight_sleeps(server):
    return server.get_json("/inflight")["sleep"]


def test_slow_view_does_not_block_other_requests(serve):
    server = serve("pep3333:application", blocking_threads=2, validated=True)
    m = READY_RE.match(server.ready_line)
    assert m and m["threads"] == "2" and not m["auto"], server.ready_line
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        slow = pool.submit(requests.get, server.url("/sleep?s=3"), timeout=HTTP_TIMEOUT)
        # The slow view is running (and answering this proves a second thread is free).
        wait_until(lambda: inflight_sleeps(server) == 1, 5, "the slow request to start")
        started = time.monotonic()
        ok = server.get("/ok")
        elapsed = time.monotonic() - started
        assert ok.status_code == 200 and ok.text == "ok\n"
        assert not slow.done(), "the slow request finished first: /ok waited for it"
        assert elapsed < 1.5, f"/ok took {elapsed:.2f}s while a slow view ran"
        r = slow.result(timeout=HTTP_TIMEOUT)
        assert r.status_code == 200 and r.text == "slept\n"


def test_zero_blocking_threads_still_serves_everything(serve):
    server = serve("pep3333:application", blocking_threads=0, validated=True)
    m = READY_RE.match(server.ready_line)
    assert m and m["threads"] == "0" and not m["auto"], server.ready_line

    assert server.get("/ok").text == "ok\n"
    assert server.get("/environ").json()["environ"]["REQUEST_METHOD"] == "GET"
    assert server.get("/write").content == b"from write 1\nfrom write 2\nfrom iterable\n"
    assert server.get("/stream?n=3&delay=0.05").content == b"chunk 0\nchunk 1\nchunk 2\n"
    assert server.get("/filewrapper").content == bytes(range(256)) * 400
    body = b"a\nb\nc"
    r = server.post("/input?mode=readlines", data=body)
    assert [p.encode("latin-1") for p in r.json()["pieces"]] == [b"a\n", b"b\n", b"c"]
    assert server.get("/exc-info").status_code == 500

    # Concurrent clients are all answered (one at a time is fine).
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda _: requests.get(server.url("/sleep?s=0.2"), timeout=HTTP_TIMEOUT),
                                range(4)))
    assert [r.status_code for r in results] == [200] * 4
    assert server.get("/ok").status_code == 200
