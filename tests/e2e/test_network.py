"""Listening: IPv6 and IPv4, and forwarded headers left to the application."""

import json
import socket

import pytest

from conftest import READY_RE

# What this module checks is decided in Go: it runs with one CPython (conftest.py).
pytestmark = pytest.mark.once


def environ_over(family, host, port):
    """GET /environ over a raw socket of the given family; the parsed JSON."""
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect((host, port))
        s.sendall(b"GET /environ HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 10.9.8.7\r\n"
                  b"X-Forwarded-Proto: https\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    return json.loads(body)["environ"]


def test_unspecified_ipv6_listens_on_both(serve):
    server = serve("pep3333:application", args=["--host", "::"], validated=True)
    assert f"on http://[::]:{server.port} " in server.ready_line
    v4 = environ_over(socket.AF_INET, "127.0.0.1", server.port)
    assert v4["REMOTE_ADDR"] == "127.0.0.1"  # not ::ffff:127.0.0.1
    v6 = environ_over(socket.AF_INET6, "::1", server.port)
    assert v6["REMOTE_ADDR"] == "::1"


@pytest.mark.parametrize("front", ["fasthttp-asgi", "nethttp-asgi"])
def test_asgi_client_of_a_dual_stack_listener_is_ipv4(serve, front):
    """An IPv4 client of a listener on :: is 127.0.0.1 in the ASGI scope
    under both front ends, as REMOTE_ADDR is; fasthttp's address of it is
    the IPv4-mapped ::ffff:127.0.0.1."""
    from conftest import APPS
    from test_hostile import FRONTS
    spec, binary, prefix, _ = FRONTS[front]
    server = serve(spec, binary=binary, app_dir=APPS, args=["--host", "::"])
    for family, host, want in [(socket.AF_INET, "127.0.0.1", "127.0.0.1"), (socket.AF_INET6, "::1", "::1")]:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.settimeout(10)
            s.connect((host, server.port))
            s.sendall(f"GET {prefix}/c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        assert json.loads(body)["client"][0] == want, body


@pytest.mark.parametrize("spelling", ["::1", "[::1]"])
def test_ipv6_loopback_alone(serve, spelling):
    server = serve("pep3333:application", args=["--host", spelling], validated=True)
    m = READY_RE.match(server.ready_line)
    assert m, server.ready_line
    assert f"on http://[::1]:{server.port} " in server.ready_line
    assert environ_over(socket.AF_INET6, "::1", server.port)["REMOTE_ADDR"] == "::1"
    with pytest.raises(ConnectionRefusedError):
        environ_over(socket.AF_INET, "127.0.0.1", server.port)


def test_forwarded_headers_are_not_applied(serve):
    server = serve("pep3333:application", validated=True)
    env = environ_over(socket.AF_INET, "127.0.0.1", server.port)
    assert env["REMOTE_ADDR"] == "127.0.0.1"
    assert env["wsgi.url_scheme"] == "http"
    assert env["HTTP_X_FORWARDED_FOR"] == "10.9.8.7"
    assert env["HTTP_X_FORWARDED_PROTO"] == "https"
