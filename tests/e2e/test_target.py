"""How a request's target reaches the application, on both front ends:
m0serve (fasthttp) and the net/http front end (tests/e2e/nethost), each
with the WSGI and the ASGI recording application (apps/recorder.py, which
answers with what it was handed). A fragment sent in the target ("#" and
after it; RFC 9112 3.2 has none there) is dropped by the strict reading
before either front end parses the head: no path, query or raw target the
application sees holds it. A chunked body reaches it whole with its
extensions and trailer fields dropped.
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
    return serve_module(spec, binary=binary, app_dir=APPS), prefix, asgi

TARGETS = [
    # (target sent, path, query)
    ("/t/a?b=1#frag", "/t/a", "b=1"),
    ("/t/a#frag?b=1", "/t/a", ""),
    ("/t/a%20b?c=%23#d#e", "/t/a%20b", "c=%23"),
    ("/t/a?#", "/t/a", ""),
    ("/t/a", "/t/a", ""),
]


def ask(server, raw):
    """Sends raw on a new connection; the status and the JSON answer."""
    with socket.create_connection((server.host, server.port), timeout=hostile.TIMEOUT) as sock:
        sock.sendall(raw)
        buf = bytearray()
        while b"\r\n\r\n" not in buf:
            buf += sock.recv(65536)
        head, _, body = bytes(buf).partition(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        while len(body) < length:
            body += sock.recv(65536)
    return int(head.split(b" ")[1]), json.loads(body)


@pytest.mark.parametrize("sent, path, query", TARGETS, ids=[t[0] for t in TARGETS])
def test_fragment_never_reaches_the_application(front, sent, path, query):
    server, prefix, asgi = front
    status, seen = ask(server, f"GET {prefix}{sent} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert status == 200, seen
    uri = prefix + path + ("?" + query if "?" in sent.split("#")[0] else "")
    if asgi:
        assert seen["path"] == prefix + path.replace("%20", " ")
        assert seen["raw_path"] == prefix + path
        assert seen["query_string"] == query
    else:
        assert seen["PATH_INFO"] == path.replace("%20", " ")
        assert seen["QUERY_STRING"] == query
        assert seen["REQUEST_URI"] == uri
        assert seen["RAW_URI"] == uri


def test_chunked_body_with_extensions_and_trailer_fields(front):
    server, prefix, _ = front
    raw = (f"POST {prefix}/t/chunked#x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
           '5 ; a = b ;c="d; \\"e"\r\nhello\r\n6;f\r\n world\r\n0;g=h\r\n'
           "Content-Type: text/plain\r\nContent-Length: 40\r\nX-Checksum: 1\r\n\r\n").encode()
    status, seen = ask(server, raw)
    assert status == 200, seen
    assert seen["seen"] == len(b"hello world")
