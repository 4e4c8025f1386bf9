"""examples/hello: the smallest app, over several real clients."""

import http.client
import subprocess

from conftest import HTTP_TIMEOUT, RawReader, http_request, read_response

HELLO = b"Hello, World!\n"


def test_get(hello_server):
    r = hello_server.get("/")
    assert r.status_code == 200
    assert r.content == HELLO
    assert r.headers["Content-Type"].startswith("text/plain")


def test_get_with_curl(hello_server):
    out = subprocess.run(
        ["curl", "--silent", "--show-error", "--http1.1", "--max-time", str(HTTP_TIMEOUT),
         "--include", hello_server.url("/")],
        capture_output=True, timeout=HTTP_TIMEOUT + 5, check=True).stdout
    head, _, body = out.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert body == HELLO


def test_head_has_no_body(hello_server):
    with hello_server.connect() as sock:
        sock.sendall(http_request("HEAD", "/", hello_server.port, [("Connection", "close")]))
        reader = RawReader(sock)
        resp = read_response(reader, "HEAD")
        rest = reader.read_to_eof()  # whatever follows the head, until the server closes
    assert resp.status == 200
    assert resp.header("Content-Type", "").startswith("text/plain")
    assert rest == b"", f"HEAD response carried a body: {rest!r}"
    assert reader.eof and not reader.timed_out, "connection not closed after HEAD with Connection: close"


def test_head_then_get_on_one_connection(hello_server):
    with hello_server.connect() as sock:
        reader = RawReader(sock)
        sock.sendall(http_request("HEAD", "/", hello_server.port))
        head = read_response(reader, "HEAD")
        assert head.status == 200
        sock.sendall(http_request("GET", "/", hello_server.port))
        # A body wrongly sent after HEAD would show up here instead of a status line.
        get = read_response(reader)
        assert get.status == 200, f"expected a fresh response, got {get.raw[:200]!r}"
        assert get.body == HELLO


def test_keep_alive_reuses_one_connection(hello_server):
    conn = http.client.HTTPConnection(hello_server.host, hello_server.port, timeout=HTTP_TIMEOUT)
    try:
        conn.connect()
        sock = conn.sock
        local = sock.getsockname()
        for i in range(100):
            conn.request("GET", "/")
            resp = conn.getresponse()
            body = resp.read()
            assert resp.status == 200 and body == HELLO, f"request {i}"
            assert (resp.getheader("Connection") or "").lower() != "close", f"server closed after request {i}"
            assert conn.sock is sock and sock.getsockname() == local, f"reconnected at request {i}"
    finally:
        conn.close()
