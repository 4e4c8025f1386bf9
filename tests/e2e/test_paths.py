"""The path every front-end choice is made on, on both front ends: m0serve
(fasthttp) and the net/http front end (tests/e2e/nethost), each with the
WSGI and the ASGI recording application. fasthttp normalises the path it
parses ("/x/../healthz" is "/healthz" there) and net/http does not; the
health path, the metrics path and the access log read the path as sent
under both, so a target with dot segments is never taken for the health
or metrics path on one front end and passed on by the other.
"""

import json
import socket

import pytest

import hostile
from conftest import APPS
from test_hostile import FRONTS

# What this module checks is decided in Go: it runs with one CPython (conftest.py).
pytestmark = pytest.mark.once


@pytest.fixture(scope="module", params=list(FRONTS))
def front(request, serve_module):
    spec, binary, prefix, asgi = FRONTS[request.param]
    server = serve_module(spec, binary=binary, app_dir=APPS,
                          args=("--health-path", "/healthz", "--metrics", "--access-log"))
    return server, prefix, binary is None


def ask(server, target):
    """GET target as sent, on a new connection: the status, the head's
    lines and the body."""
    with socket.create_connection((server.host, server.port), timeout=hostile.TIMEOUT) as sock:
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        buf = bytearray()
        while chunk := sock.recv(65536):
            buf += chunk
    head, _, body = bytes(buf).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    return int(lines[0].split(" ")[1]), [line.lower() for line in lines[1:]], body


@pytest.mark.parametrize("target", ["/x/../healthz", "//healthz", "/x/../__metrics", "/./__metrics"])
def test_dot_segments_are_not_the_health_or_metrics_path(front, target):
    server, prefix, fast = front
    status, head, body = ask(server, target)
    # Neither the health JSON nor the metrics exposition answered it.
    assert b'"status":"ok"' not in body.replace(b" ", b""), body
    assert b"m0_http_request" not in body, body
    if fast:
        # m0serve's application is handed it, as sent.
        assert status == 200, body
        seen = json.loads(body)
        assert target in (seen.get("path"), seen.get("PATH_INFO"), seen.get("raw_path")), seen
    else:
        # net/http's mux, behind the middleware, cleans it with a redirect.
        assert status in (301, 307) and any(line.startswith("location:") for line in head), head


@pytest.mark.parametrize("target", ["/healthz", "/__metrics"])
def test_the_paths_themselves_are_answered(front, target):
    server, prefix, fast = front
    status, head, body = ask(server, target)
    assert status == 200
    if target == "/healthz":
        assert json.loads(body)["status"] == "ok"
    else:
        assert b"m0_http_request" in body
