"""HEAD on both bridges and both front ends (m0serve's fasthttp, nethost's
net/http): the Content-Length the application set is sent as it set it,
whatever body it produced (RFC 9110 9.3.2 and 8.6: the length a GET would
have sent), else the length of a whole body it produced; with neither,
none is sent. No body byte follows the head."""

import pytest

from conftest import FRONT_ENDS, RawReader, http_request, read_response, serve_on

# What this module checks is decided in Go: it runs with one CPython (conftest.py).
pytestmark = pytest.mark.once


@pytest.fixture(scope="module", params=[(fe, spec) for fe in FRONT_ENDS
                                        for spec in ("sized:application", "sized:app")],
                ids=lambda p: f"{p[0]}-{p[1].split(':')[1]}")
def sized(request, serve_module):
    front_end, spec = request.param
    return serve_on(serve_module, front_end, spec), spec.endswith(":app")


@pytest.mark.parametrize("query, length", [
    ("named=1234&body=0", "1234"),
    ("named=1234&body=1234", "1234"),
    ("named=1234&body=10", "1234"),
    ("body=5", "5"),
    ("body=0", None),
    ("named=1234&body=1234&stream=1", "1234"),
    ("body=5&stream=1", None),
])
def test_head_content_length(sized, query, length):
    server, asgi = sized
    if "named" in query and "stream" in query and not asgi:
        pytest.skip("a WSGI body with a Content-Length is gathered whole")
    with server.connect() as sock:
        # A GET after it on the same connection parses only if the HEAD's
        # answer carries no body.
        sock.sendall(http_request("HEAD", f"/?{query}", server.port)
                     + http_request("GET", "/?named=3&body=3", server.port))
        reader = RawReader(sock)
        head = read_response(reader, method="HEAD")
        after = read_response(reader)
    assert head.status == 200, head
    assert head.header("Content-Length") == length, head
    assert after.status == 200 and after.body == b"xxx", after
