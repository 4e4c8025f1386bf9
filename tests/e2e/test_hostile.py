"""Hostile HTTP on both front ends: every case of the table in hostile.py,
on m0serve (fasthttp) with a WSGI and an ASGI application and on the
net/http front end (tests/e2e/nethost, the m0 host with a Go mux) with the
same two. Each case is answered as the table says, a refused request never
reaches the application (the recording application writes down every
request it is handed), nothing hidden in a body is ever served, and the
server serves on.
"""

import pytest

import hostile
from conftest import APPS, ROOT

# What this module checks is decided in Go: it runs with one CPython (conftest.py).
pytestmark = pytest.mark.once

NETHOST = ROOT / ".bin" / "nethost"

FRONTS = {
    "fasthttp-wsgi": ("recorder:application", None, "", False),
    "fasthttp-asgi": ("recorder:app", None, "", True),
    "nethttp-wsgi": (None, NETHOST, "/wsgi", False),
    "nethttp-asgi": (None, NETHOST, "/asgi", True),
}


@pytest.fixture(scope="module", params=list(FRONTS))
def front(request, serve_module, tmp_path_factory):
    spec, binary, prefix, websocket = FRONTS[request.param]
    record = tmp_path_factory.mktemp("record") / "requests.txt"
    server = serve_module(spec, binary=binary, app_dir=APPS,
                          args=("--max-body", str(hostile.MAX_BODY)),
                          env={"M0_RECORD": str(record)})
    return server, prefix, websocket, record


def cases():
    return [c for c in hostile.cases()]


@pytest.mark.parametrize("case", cases(), ids=lambda c: c.name)
def test_hostile_case(front, case):
    server, prefix, websocket, record = front
    if case.websocket and not websocket:
        pytest.skip("a WSGI application takes no WebSocket")
    before = record.read_text() if record.exists() else ""
    result = hostile.probe((server.host, server.port), case, prefix)
    wrong = hostile.verdict(case, result)
    assert wrong is None, f"{case.name}: {wrong} ({case.why})"
    seen = (record.read_text() if record.exists() else "")[len(before):]
    targets = [line.split(" ")[1] for line in seen.splitlines()]
    want = [prefix + t for t in case.reached]
    if not result.closed:
        want.append(prefix + "/h/follow")
    assert targets == want, f"{case.name}: the application saw {targets}, not {want}"
    assert server.proc.poll() is None, server.describe()


def test_nothing_smuggled_and_still_serving(front):
    server, prefix, _, record = front
    result = hostile.probe((server.host, server.port), hostile.cases()[3], prefix)  # version-1.0
    assert result.statuses == [200]
    text = record.read_text()
    assert "/smuggled/" not in text, text
