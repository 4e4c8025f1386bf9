"""--max-body, --body-timeout, --idle-timeout and --max-keepalive-requests,
through the binary, with real clients."""

import socket
import subprocess
import time

import pytest
import requests

from conftest import HTTP_TIMEOUT

# What this module checks is decided in Go: it runs with one CPython (conftest.py).
pytestmark = pytest.mark.once


def lines_with(server, text):
    return [line for line in server.stderr.splitlines() if text in line]


def test_body_over_the_cap_is_413_for_a_client_that_uploads_first(serve):
    server = serve("pep3333:application", args=["--max-body", "1m"], validated=True)
    for _ in range(2):
        # requests writes the whole body before it reads the answer.
        r = requests.post(server.url("/input"), data=b"x" * (2 << 20), timeout=HTTP_TIMEOUT)
        assert r.status_code == 413 and r.headers["Content-Type"].startswith("text/plain"), r.text
    assert requests.post(server.url("/input?mode=read"), data=b"y" * 1000, timeout=HTTP_TIMEOUT).status_code == 200
    refusals = lines_with(server, "--max-body")
    assert len(refusals) == 1, server.stderr  # the first refusal only
    assert "1m" in refusals[0] and "M0_MAX_BODY" in refusals[0]


def test_chunked_body_over_the_cap_is_413(serve):
    server = serve("pep3333:application", args=["--max-body", "64k"], validated=True)
    out = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Transfer-Encoding: chunked",
                          "--data-binary", "@-", server.url("/input")],
                         input=b"z" * (256 << 10), capture_output=True, timeout=HTTP_TIMEOUT)
    assert out.stdout == b"413", out


def test_max_body_from_the_variable(serve):
    server = serve("pep3333:application", env={"M0_MAX_BODY": "10k"}, validated=True)
    assert requests.post(server.url("/input"), data=b"x" * 20000, timeout=HTTP_TIMEOUT).status_code == 413


def test_stalled_body_is_408_then_closed(serve):
    server = serve("pep3333:application", args=["--body-timeout", "1"], validated=True)
    with socket.create_connection((server.host, server.port), timeout=10) as s:
        s.sendall(b"POST /input HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
        start = time.monotonic()
        data = b""
        while chunk := s.recv(4096):
            data += chunk
        took = time.monotonic() - start
    assert data.startswith(b"HTTP/1.1 408"), data
    assert 0.8 <= took <= 5, took
    refusals = lines_with(server, "--body-timeout")
    assert len(refusals) == 1 and "M0_BODY_TIMEOUT" in refusals[0], server.stderr


def test_idle_keepalive_connection_closes(serve):
    server = serve("pep3333:application", args=["--idle-timeout", "1"], validated=True)
    with socket.create_connection((server.host, server.port), timeout=10) as s:
        s.sendall(b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
        first = s.recv(4096)
        assert first.startswith(b"HTTP/1.1 200"), first
        start = time.monotonic()
        assert s.recv(4096) == b""  # closed by the server
        took = time.monotonic() - start
    assert 0.8 <= took <= 5, took


def test_max_keepalive_requests(serve):
    server = serve("pep3333:application", args=["--max-keepalive-requests", "3"], validated=True)
    with socket.create_connection((server.host, server.port), timeout=10) as s:
        f = s.makefile("rb")
        for i in range(3):
            s.sendall(b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
            status = f.readline()
            headers = {}
            while (line := f.readline()) not in (b"\r\n", b""):
                k, _, v = line.decode().partition(":")
                headers[k.strip().lower()] = v.strip()
            f.read(int(headers["content-length"]))
            assert status.startswith(b"HTTP/1.1 200")
            assert (headers.get("connection") == "close") == (i == 2), (i, headers)
        assert f.read() == b""  # closed after the third


def test_a_client_that_stops_reading_is_dropped(serve):
    """No send progress for --idle-timeout ends the response: the
    application's close() is called and its thread freed, while the client
    still reads nothing; the server keeps serving."""
    server = serve("pep3333:application", args=["--idle-timeout", "1"], blocking_threads=1, validated=True)
    before = server.get_json("/closecount?id=slow")["count"]
    with socket.create_connection((server.host, server.port), timeout=20) as s:
        s.sendall(b"GET /bytes?id=slow&n=1000000000 HTTP/1.1\r\nHost: x\r\n\r\n")
        deadline = time.monotonic() + 10
        # With one Python thread, /closecount answers only once the stalled
        # stream has let its thread go.
        while server.get_json("/closecount?id=slow")["count"] == before:
            assert time.monotonic() < deadline, "the stalled response was never dropped"
            time.sleep(0.1)
        assert server.get("/ok").text == "ok\n"


def test_http_client_uploading_10mb_gets_the_413(serve):
    """http.client writes the whole body before reading: without the linger
    it would see a reset instead of the answer."""
    import http.client
    server = serve("pep3333:application", args=["--max-body", "1m"], validated=True)
    for _ in range(2):
        conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
        conn.request("POST", "/input", body=b"x" * (10 << 20), headers={"Content-Type": "application/octet-stream"})
        resp = conn.getresponse()
        assert resp.status == 413, resp.read()
        conn.close()
