"""Graceful stop: SIGTERM/SIGINT let in-flight requests finish, then exit 0."""

import concurrent.futures
import signal

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
