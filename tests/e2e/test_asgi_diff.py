"""Differential: the same requests to uvicorn and to m0serve serving the same
ASGI application (apps/asgi_diff_app.py), compared.

Status, headers and bodies must match, with `date` and `server` dropped and
header names compared lowercased (uvicorn lowercases them, m0serve's front
end canonicalises them). The order of different header names is not
compared; the order of one name's repeated values is.

What m0serve documents as different from uvicorn (docs/asgi.md, "Coming
from uvicorn"; docs/limits.md) is asserted as a difference, each in its own
test (test_documented_*) whose docstring names the bullet it checks: what
uvicorn does and what m0serve does, both asserted, so that a change on either
side shows. A difference found and not documented as one is to be asserted as
equality and marked xfail(strict=True) until the server changes or the
difference is documented.
"""

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect as ws_connect

from conftest import (APPS, HOST, HTTP_TIMEOUT, M0SERVE, RawReader, free_port, http_request,
                      read_response, wait_until)

# Every test here serves an ASGI application: a free-threaded build refuses it.
pytestmark = pytest.mark.gil

SPEC = "asgi_diff_app:app"
DROPPED = {"date", "server"}
VHOST = "diff.example"  # the Host header where the port would otherwise differ


# --------------------------------------------------------------------------
# the two servers


class Uvicorn:
    """uvicorn in a subprocess, with the client methods of conftest.Server
    that this file uses."""

    def __init__(self, spec, workdir, args=()):
        self.host, self.port = HOST, free_port()
        self.workdir = workdir
        self.argv = [sys.executable, "-m", "uvicorn", spec, "--host", HOST, "--port", str(self.port),
                     "--app-dir", str(APPS), "--no-access-log", "--lifespan", "on", *args]
        self.log_path = workdir / "uvicorn.log"
        self.proc = None

    def start(self):
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         cwd=self.workdir, start_new_session=True,
                                         env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
        return self

    def wait_ready(self, timeout=20):
        def accepting():
            if self.proc.poll() is not None:
                raise AssertionError(f"uvicorn exited with {self.proc.returncode}\n{self.describe()}")
            try:
                socket.create_connection((self.host, self.port), timeout=1).close()
                return True
            except OSError:
                return False
        wait_until(accepting, timeout, lambda: f"uvicorn to accept\n{self.describe()}")
        return self

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        return self.proc.returncode

    @property
    def stderr(self):
        return self.log_path.read_bytes().decode("utf-8", "replace")

    def describe(self):
        return f"command: {' '.join(self.argv)}\n--- output ---\n{self.stderr[-6000:]}"

    def url(self, path="/"):
        return f"http://{self.host}:{self.port}{path}"

    def connect(self, timeout=HTTP_TIMEOUT):
        return socket.create_connection((self.host, self.port), timeout=timeout)


@pytest.fixture(scope="module")
def uv(tmp_path_factory):
    server = Uvicorn(SPEC, tmp_path_factory.mktemp("uvicorn")).start().wait_ready()
    yield server
    # uvicorn re-raises the SIGTERM it handled once it has shut down cleanly.
    assert server.stop() in (0, -signal.SIGTERM), server.describe()


@pytest.fixture(scope="module")
def m0(serve_module):
    return serve_module(SPEC)


@pytest.fixture(scope="module")
def servers(uv, m0):
    return {"uvicorn": uv, "m0serve": m0}


@pytest.fixture(scope="module")
def clients(servers):
    made = {name: httpx.Client(base_url=s.url(""), timeout=HTTP_TIMEOUT) for name, s in servers.items()}
    yield made
    for c in made.values():
        c.close()


# --------------------------------------------------------------------------
# comparing


def norm_headers(pairs):
    """(lowercased name, value) without date and server, grouped by name;
    one name's values keep their order."""
    kept = [(n.lower(), v) for n, v in pairs if n.lower() not in DROPPED]
    return sorted(kept, key=lambda kv: kv[0])


def view(resp):
    """What must match of a RawResponse."""
    return {"version": resp.version, "status": resp.status, "headers": norm_headers(resp.headers),
            "body": resp.body, "chunked": resp.chunked, "complete": resp.complete}


def raw_exchange(server, data, method="GET", then_eof=False):
    """Send raw request bytes on a fresh connection; the first response, and
    (then_eof) whether the server closed the connection after it."""
    with server.connect() as sock:
        sock.sendall(data)
        reader = RawReader(sock)
        resp = read_response(reader, method)
        closed = reader.at_eof(wait=1.0) if then_eof else None
    return resp, closed


def raw_exchange_then_next(server, data, method="GET"):
    """Send raw request bytes on a fresh connection, read the response, then
    ask GET /json on the same connection: both responses. The second has no
    status (and eof) when the server closed the connection after the first;
    quicker than waiting for an EOF that does not come."""
    with server.connect() as sock:
        sock.sendall(data)
        reader = RawReader(sock)
        first = read_response(reader, method)
        try:
            sock.sendall(b"GET /json HTTP/1.1\r\nHost: x\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            reader.eof = True
        return first, read_response(reader)


def both_raw(servers, method, path, headers=(), body=b"", version="HTTP/1.1", then_eof=False):
    headers = list(headers)
    if not any(n.lower() == "host" for n, _ in headers):
        headers.insert(0, ("Host", VHOST))
    data = http_request(method, path, 0, headers, body, version)
    return {name: raw_exchange(s, data, method, then_eof) for name, s in servers.items()}


def assert_same_raw(servers, method, path, headers=(), body=b"", version="HTTP/1.1"):
    out = both_raw(servers, method, path, headers, body, version)
    u, m = out["uvicorn"][0], out["m0serve"][0]
    assert u.status is not None and m.status is not None, (u, m)
    assert view(m) == view(u), f"\nuvicorn: {u!r}\nm0serve: {m!r}"
    return u, m


def httpx_view(r):
    return {"status": r.status_code, "headers": norm_headers(r.headers.multi_items()), "body": r.content}


def both_httpx(clients, method, path, **kwargs):
    kwargs.setdefault("headers", {})
    kwargs["headers"].setdefault("Host", VHOST)
    return {name: c.request(method, path, **kwargs) for name, c in clients.items()}


def assert_same_httpx(clients, method, path, **kwargs):
    out = both_httpx(clients, method, path, **kwargs)
    u, m = httpx_view(out["uvicorn"]), httpx_view(out["m0serve"])
    assert m == u
    return out["uvicorn"]


def scope_of(resp, server):
    """A scope echoed by the application, with what must differ (ports)
    taken out."""
    s = json.loads(resp.body)
    assert s["server"] == [HOST, server.port], s
    assert s["client"][0] == HOST and isinstance(s["client"][1], int) and s["client"][1] > 0, s
    s["server"][1] = s["client"][1] = "PORT"
    return s


def both_scopes(servers, method, path, headers=(), body=b"", version="HTTP/1.1"):
    out = both_raw(servers, method, path, headers, body, version)
    for name, (resp, _) in out.items():
        assert resp.status == 200 and resp.complete, f"{name}: {resp!r}"
    return {name: scope_of(out[name][0], servers[name]) for name in servers}


def without_extensions(scope):
    s = dict(scope)
    s.pop("extensions", None)
    s["keys"] = [k for k in s["keys"] if k != "extensions"]
    return s


# --------------------------------------------------------------------------
# responses that match


@pytest.mark.parametrize("path", [
    "/json",
    "/items/5?q=x&tag=a&tag=b",
    "/items/007?q=caf%C3%A9",
    "/items/abc",  # 422
    "/items/5?tag=",
    "/path/caf%C3%A9/a%2Fb/x%20y?q=%E2%9C%93",
    "/path/%F0%9F%94%A5?x=%2B+1&y=a%26b",
    "/path/a//b/./c/../d",
    "/path/100%25/%7Euser",
    "/state",
    "/nope",  # 404
    "/nope/caf%C3%A9",
])
def test_get(servers, path):
    assert_same_raw(servers, "GET", path)


@pytest.mark.parametrize("method,path", [
    ("POST", "/json"),  # 405
    ("DELETE", "/items/1"),
    ("PUT", "/state"),
    ("HEAD", "/json"),
    ("HEAD", "/bytes/1000"),
    ("HEAD", "/stream"),
    ("HEAD", "/nope"),
    ("OPTIONS", "/json"),  # no preflight: 405
    ("PATCH", "/json"),
])
def test_methods(servers, method, path):
    assert_same_raw(servers, method, path)


@pytest.mark.parametrize("headers", [
    [("Origin", "https://allowed.example"), ("Access-Control-Request-Method", "POST"),
     ("Access-Control-Request-Headers", "x-custom")],
    [("Origin", "https://other.example"), ("Access-Control-Request-Method", "POST")],  # 400
    [("Origin", "https://allowed.example"), ("Access-Control-Request-Method", "PUT")],  # 400
], ids=["allowed", "other-origin", "other-method"])
def test_cors_preflight(servers, headers):
    assert_same_raw(servers, "OPTIONS", "/json", headers)


def test_cors_simple_request(servers):
    u, _ = assert_same_raw(servers, "GET", "/json", [("Origin", "https://allowed.example")])
    assert u.header("access-control-allow-origin") == "https://allowed.example"


STATUS_CODES = [200, 201, 202, 203, 204, 206, 226, 304, 400, 401, 402, 403, 404, 409, 410, 413, 414,
                416, 422, 429, 451, 500, 501, 502, 503, 504]


@pytest.mark.parametrize("code", STATUS_CODES)
def test_status_codes(servers, code):
    u, _ = assert_same_raw(servers, "GET", f"/status/{code}")
    assert u.status == code


# Reason phrases: uvicorn takes http.HTTPStatus's, whose phrases for some
# codes changed to RFC 9110's names in CPython 3.13 (the Python running this
# file runs uvicorn); m0serve's come from its own table, the same under every
# Python. test_documented_reason_phrases.
PY313 = sys.version_info >= (3, 13)
M0SERVE_REASONS = {
    413: "Request Entity Too Large",
    414: "Request URI Too Long",
    416: "Requested Range Not Satisfiable",
    418: "I'm a teapot",
    422: "Unprocessable Entity",
    299: "Unknown Status Code",
    499: "Unknown Status Code",
    599: "Unknown Status Code",
}
UVICORN_REASONS = {
    413: "Content Too Large" if PY313 else "Request Entity Too Large",
    414: "URI Too Long" if PY313 else "Request-URI Too Long",
    416: "Range Not Satisfiable" if PY313 else "Requested Range Not Satisfiable",
    418: "I'm a Teapot",
    422: "Unprocessable Content" if PY313 else "Unprocessable Entity",
    299: "",  # no registered phrase: none sent
    499: "",
    599: "",
}


@pytest.mark.parametrize("code", [c for c in STATUS_CODES if c not in M0SERVE_REASONS])
def test_reason_phrase(servers, code):
    out = both_raw(servers, "GET", f"/status/{code}")
    u, m = out["uvicorn"][0], out["m0serve"][0]
    assert u.status == m.status == code
    assert m.reason == u.reason


@pytest.mark.parametrize("code", M0SERVE_REASONS)
def test_documented_reason_phrases(servers, code):
    """docs/asgi.md, Coming from uvicorn: "Reason phrases are the server's
    table": 414 'Request URI Too Long', 418 "I'm a teapot", 'Unknown Status
    Code' for a code with no phrase, the older names of 413, 416 and 422;
    uvicorn's are http.HTTPStatus's (renamed in CPython 3.13; the same as
    m0serve's for 413, 416 and 422 before it), none for an unregistered code."""
    out = both_raw(servers, "GET", f"/status/{code}")
    u, m = out["uvicorn"][0], out["m0serve"][0]
    assert u.status == m.status == code
    assert u.reason == UVICORN_REASONS[code], u
    assert m.reason == M0SERVE_REASONS[code], m
    assert u.body == m.body == b"status %d\n" % code
    if code in (413, 416, 422) and not PY313:
        assert u.reason == m.reason


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_redirects(servers, code):
    u, _ = assert_same_raw(servers, "GET", f"/redirect/{code}")
    assert u.status == code and u.header("location") == "/json?from=redirect"


def test_redirect_to_an_absolute_url(servers):
    u, _ = assert_same_raw(servers, "GET", "/redirect-abs")
    assert u.header("location") == f"http://{VHOST}/json"


def test_set_cookie_headers(servers):
    u, m = assert_same_raw(servers, "GET", "/cookies/set")
    assert len(u.header_values("set-cookie")) == 3
    assert m.header_values("set-cookie") == u.header_values("set-cookie")


def test_cookies_reach_the_app(servers):
    u, _ = assert_same_raw(servers, "GET", "/cookies/echo",
                           [("Cookie", 'a=1; b="two words"'), ("Cookie", "c=3; d=caf%C3%A9")])
    assert json.loads(u.body)["cookies"]["a"] == "1"


def test_repeated_response_headers(servers):
    u, m = assert_same_raw(servers, "GET", "/headers/repeated")
    assert m.header_values("x-multi") == ["one", "two", "three"]
    assert m.header_values("link") == u.header_values("link")
    assert m.header_values("x-empty") == [""]


def test_request_headers_reach_the_app(servers):
    u, _ = assert_same_raw(servers, "GET", "/headers/echo", [
        ("X-A", "1"), ("x-a", "2"), ("X-Mixed-CASE", "Keep Case"), ("X-Empty", ""),
        ("X-Utf8", "caf\u00e9".encode().decode("latin-1")), ("X-Colon", "a: b"), ("X-A", "3")])
    got = json.loads(u.body)["headers"]
    assert [v for n, v in got if n == "x-a"] == ["1", "2", "3"]


def test_large_response_body(servers):
    u, _ = assert_same_raw(servers, "GET", "/bytes/3000000")
    assert len(u.body) == 3000000


# --------------------------------------------------------------------------
# the scope


SCOPE_CASES = {
    "get": ("GET", "/raw/s?a=1&b=%20x&c=caf%C3%A9", [("X-Custom", "1")], b"", "HTTP/1.1"),
    "post-body": ("POST", "/raw/s", [("Content-Type", "text/plain")], b"hello body", "HTTP/1.1"),
    "put": ("PUT", "/raw/s", [], b"x" * 1000, "HTTP/1.1"),
    "http-1.0": ("GET", "/raw/s", [], b"", "HTTP/1.0"),
    "encoded-path": ("GET", "/raw/caf%C3%A9/a%2Fb/100%zz/%7e", [], b"", "HTTP/1.1"),
    "dots-and-slashes": ("GET", "/raw//double/./dot/../x", [], b"", "HTTP/1.1"),
    "absolute-form": ("GET", f"http://{VHOST}/raw/abs?x=1", [], b"", "HTTP/1.1"),
    "empty-query": ("GET", "/raw/s?", [], b"", "HTTP/1.1"),
    "plus-and-amp": ("GET", "/raw/s?a=1+2&b=%2B&&c", [], b"", "HTTP/1.1"),
    "repeated-headers": ("GET", "/raw/s", [("X-A", "1"), ("Accept", "a"), ("x-a", "2"),
                                            ("Accept", "b")], b"", "HTTP/1.1"),
    "bare": ("GET", "/bare/s?z=9", [], b"", "HTTP/1.1"),
    "fastapi": ("GET", "/scope?from=fastapi", [], b"", "HTTP/1.1"),
    "fastapi-post": ("POST", "/scope", [("Content-Type", "application/json")], b"{}", "HTTP/1.1"),
}


@pytest.mark.parametrize("case", SCOPE_CASES)
def test_http_scope(servers, case):
    method, path, headers, body, version = SCOPE_CASES[case]
    s = both_scopes(servers, method, path, headers, body, version)
    # scope["extensions"]: test_http_scope_extensions.
    assert without_extensions(s["m0serve"]) == without_extensions(s["uvicorn"])


def test_http_scope_fields(servers):
    """The matching scope is the one ASGI asks for, not two equal mistakes."""
    s = both_scopes(servers, "GET", "/raw/caf%C3%A9?q=1")["m0serve"]
    assert s["type"] == "http" and s["asgi"]["version"] == "3.0"
    assert s["http_version"] == "1.1" and s["scheme"] == "http" and s["method"] == "GET"
    assert s["path"] == "/raw/caf\u00e9" and s["raw_path"] == "/raw/caf%C3%A9"
    assert s["root_path"] == "/raw" and s["query_string"] == "q=1"
    assert s["headers"] == [["host", VHOST]]
    assert s["has_state"] is True


def test_documented_http_scope_extensions(servers):
    """docs/asgi.md, Coming from uvicorn: "The HTTP scope carries
    extensions: {"http.response.pathsend": {}}; uvicorn offers no extensions
    there" (uvicorn 0.54: no 'extensions' key at all)."""
    s = both_scopes(servers, "GET", "/bare/s")
    u, m = s["uvicorn"], s["m0serve"]
    assert u["extensions"] is None and "extensions" not in u["keys"], u
    assert m["extensions"] == {"http.response.pathsend": {}}, m
    assert m["keys"] == sorted([*u["keys"], "extensions"]), m


def test_lifespan_state_reaches_requests(clients):
    r = assert_same_httpx(clients, "GET", "/state")
    assert r.json() == {"from_lifespan": "yes", "started": True}


# --------------------------------------------------------------------------
# request bodies


def test_json_body_to_a_model(clients):
    r = assert_same_httpx(clients, "POST", "/model", json={"name": "caf\u00e9", "price": 1.5, "tags": ["a"]},
                          headers={"X-Custom": "hi"})
    assert r.status_code == 201 and r.json()["x_custom"] == "hi"


@pytest.mark.parametrize("body", [b'{"name": 1}', b"{not json", b"", b"[]"])
def test_invalid_json_body_is_422(clients, body):
    r = assert_same_httpx(clients, "POST", "/model", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 422


def test_form_body(clients):
    r = assert_same_httpx(clients, "POST", "/form", data={"a": ["1", "2"], "b": "caf\u00e9 & co", "c": ""})
    assert ["b", "caf\u00e9 & co"] in r.json()["fields"]


def test_multipart_upload(clients):
    files = {"file": ("report.bin", bytes(range(256)) * 800, "application/octet-stream"),
             "note": ("note.txt", "caf\u00e9\n".encode(), "text/plain")}
    r = assert_same_httpx(clients, "POST", "/upload", data={"field": "value"}, files=files,
                          headers={"Content-Type": "multipart/form-data; boundary=diff-boundary-1234"})
    parts = r.json()["parts"]
    assert [p["name"] for p in parts] == ["field", "file", "note"]
    assert parts[1]["size"] == 204800 and parts[1]["filename"] == "report.bin"


@pytest.mark.parametrize("size", [0, 1, 65536, 1 << 20, 3 << 20])
def test_raw_body_sizes(clients, size):
    body = os.urandom(size)
    r = assert_same_httpx(clients, "POST", "/echo", content=body, headers={"Content-Type": "application/x-raw"})
    assert r.json()["length"] == size and r.json()["sha256"] == hashlib.sha256(body).hexdigest()


def test_chunked_request_body(servers):
    body = b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    u, _ = assert_same_raw(servers, "POST", "/echo", [("Transfer-Encoding", "chunked")], body)
    assert json.loads(u.body)["head"] == "hello world"


def test_streamed_request_body_with_httpx(clients):
    """httpx sends a generator's body chunked, the headers and each chunk in
    writes of their own."""
    def gen():
        for i in range(50):
            yield b"part %d\n" % i
    out = {name: c.post("/echo", content=gen(), headers={"Host": VHOST}) for name, c in clients.items()}
    assert httpx_view(out["m0serve"]) == httpx_view(out["uvicorn"])
    assert out["uvicorn"].json()["length"] == sum(len(b"part %d\n" % i) for i in range(50))


def test_expect_100_continue(servers):
    """Both send the interim response before the body is there, then the answer."""
    for name, server in servers.items():
        with server.connect() as sock:
            sock.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
            reader = RawReader(sock, timeout=5)
            interim = read_response(reader)
            assert interim.status == 100, f"{name}: {interim!r}"
            sock.sendall(b"abcde")
            final = read_response(reader)
            assert final.status == 200 and json.loads(final.body)["head"] == "abcde", f"{name}: {final!r}"


# --------------------------------------------------------------------------
# streaming and framing


@pytest.mark.parametrize("path", [
    "/stream",
    "/stream?n=20&delay=0.01",
    "/stream?empty=true",  # empty body messages between the chunks
    "/stream?n=1",
])
def test_streaming_response(servers, path):
    u, m = assert_same_raw(servers, "GET", path)
    assert u.chunked
    assert m.body == u.body


def test_documented_stream_with_content_length_closes(servers):
    """docs/asgi.md, Coming from uvicorn: "A streamed body with the
    Content-Length the application named is written part by part and the
    connection closes after it; uvicorn keeps it open." Same body, same
    length, no chunks from either."""
    out = both_raw(servers, "GET", "/stream?length=true", then_eof=True)
    (u, u_closed), (m, m_closed) = out["uvicorn"], out["m0serve"]
    assert u.status == m.status == 200 and not u.chunked and not m.chunked, (u, m)
    assert u.body == m.body and u.header("content-length") == m.header("content-length"), (u, m)
    assert m.header("connection", "").lower() == "close" and m_closed, m
    assert not u_closed, u


def test_documented_status_line_of_a_stream_to_http_1_0(servers):
    """docs/asgi.md, Coming from uvicorn: "A streamed body to an HTTP/1.0
    client is sent until the connection closes under an HTTP/1.0 status
    line, where uvicorn sends chunks under HTTP/1.1 (other responses say
    HTTP/1.1 from both)". The framing: test_documented_http_1_0_stream_is_not_chunked."""
    out = both_raw(servers, "GET", "/stream", version="HTTP/1.0")
    u, m = out["uvicorn"][0], out["m0serve"][0]
    assert u.status == m.status == 200
    assert u.version == "HTTP/1.1" and m.version == "HTTP/1.0", f"\nuvicorn: {u!r}\nm0serve: {m!r}"
    out = both_raw(servers, "GET", "/json", version="HTTP/1.0")
    assert out["uvicorn"][0].version == out["m0serve"][0].version == "HTTP/1.1"


def test_error_mid_stream_truncates_the_body(servers):
    out = both_raw(servers, "GET", "/stream/raise", then_eof=True)
    for name, (resp, closed) in out.items():
        assert resp.status == 200 and resp.chunked, f"{name}: {resp!r}"
        assert resp.body == b"first chunk\n", f"{name}: {resp!r}"
        assert not resp.complete and closed, f"{name}: {resp!r}"


FRAMING = {"content-length", "transfer-encoding"}


@pytest.mark.parametrize("path,body", [("/stream/empty", b""), ("/bare/connection-close", b"closing\n")])
def test_documented_framing_of_a_single_body_message(servers, path, body):
    """docs/asgi.md, Coming from uvicorn: "A response whose first body
    message is its last is sent with its measured Content-Length; uvicorn
    sends it chunked when the application named no length"."""
    u, m = (resp for resp, _ in both_raw(servers, "GET", path).values())
    assert u.status == m.status == 200 and u.complete and m.complete, f"\nuvicorn: {u!r}\nm0serve: {m!r}"
    assert u.body == m.body == body
    assert u.chunked and u.header("transfer-encoding") == "chunked" and u.header("content-length") is None, u
    assert not m.chunked and m.header("transfer-encoding") is None, m
    assert m.header_values("content-length") == [str(len(body))], m
    # Otherwise the same headers.
    assert ([h for h in norm_headers(m.headers) if h[0] not in FRAMING]
            == [h for h in norm_headers(u.headers) if h[0] not in FRAMING])


@pytest.mark.parametrize("path,named,body,uvicorn_sent", [
    ("/bare/length-mismatch", 10, b"short", b"short"),  # fewer bytes than named
    ("/bare/length-over", 3, b"too long", b""),  # more: uvicorn sends none of them
])
def test_documented_app_content_length_that_does_not_match(servers, path, named, body, uvicorn_sent):
    """docs/asgi.md, Coming from uvicorn: "A Content-Length the application
    names that does not match the body it sends is replaced by the body's
    length; uvicorn sends the application's value and closes the connection
    after the short or long body". m0serve sends the whole body on a
    connection kept open; uvicorn sends the shorter body, and none of the
    longer one (the head only)."""
    out = both_raw(servers, "GET", path, then_eof=True)
    (u, u_closed), (m, m_closed) = out["uvicorn"], out["m0serve"]
    assert u.status == m.status == 200, f"\nuvicorn: {u!r}\nm0serve: {m!r}"
    assert u.header_values("content-length") == [str(named)], u
    assert u.body == uvicorn_sent and not u.complete and u.eof and u_closed, u
    assert m.header_values("content-length") == [str(len(body))], m
    assert m.body == body and m.complete and not m_closed, m


# --------------------------------------------------------------------------
# connections


def test_pipelined_requests(servers):
    req = (b"GET /json HTTP/1.1\r\nHost: x\r\n\r\n"
           b"GET /items/2?q=b HTTP/1.1\r\nHost: x\r\n\r\n"
           b"GET /stream?n=2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    got = {}
    for name, server in servers.items():
        with server.connect() as sock:
            sock.sendall(req)
            reader = RawReader(sock)
            got[name] = [view(read_response(reader)) for _ in range(3)]
            assert reader.at_eof(wait=2), name
    assert got["m0serve"] == got["uvicorn"]
    assert [r["status"] for r in got["uvicorn"]] == [200, 200, 200]


def test_keep_alive_serves_a_second_request(servers):
    for name, server in servers.items():
        with server.connect() as sock:
            reader = RawReader(sock)
            for i in range(3):
                sock.sendall(b"GET /items/%d HTTP/1.1\r\nHost: x\r\n\r\n" % i)
                resp = read_response(reader)
                assert resp.status == 200 and json.loads(resp.body)["item_id"] == i, f"{name}: {resp!r}"


def test_app_connection_close_header_closes(servers):
    out = both_raw(servers, "GET", "/bare/connection-close", then_eof=True)
    for name, (resp, closed) in out.items():
        assert resp.status == 200 and resp.body == b"closing\n" and closed, f"{name}: {resp!r}"
        assert resp.header("connection") == "close", f"{name}: {resp!r}"


def test_http_1_0_without_keep_alive_closes(servers):
    out = both_raw(servers, "GET", "/json", version="HTTP/1.0", then_eof=True)
    (u, u_closed), (m, m_closed) = out["uvicorn"], out["m0serve"]
    assert view(m) == view(u)
    assert u_closed and m_closed


def test_documented_http_1_0_keep_alive(servers):
    """docs/asgi.md, Coming from uvicorn: "An HTTP/1.0 request with
    Connection: keep-alive is kept alive; uvicorn closes it". m0serve
    answers Connection: keep-alive, uvicorn Connection: close."""
    out = both_raw(servers, "GET", "/json", [("Connection", "keep-alive")], version="HTTP/1.0", then_eof=True)
    (u, u_closed), (m, m_closed) = out["uvicorn"], out["m0serve"]
    assert u.status == m.status == 200 and u.body == m.body and u.complete and m.complete
    assert u.version == m.version == "HTTP/1.1"
    assert u.header_values("connection") == ["close"] and u_closed, u
    assert m.header_values("connection") == ["keep-alive"] and not m_closed, m


# --------------------------------------------------------------------------
# failing applications


def test_exception_in_an_endpoint_is_500(servers):
    """Starlette's ServerErrorMiddleware answers; both servers pass it on."""
    out = both_raw(servers, "GET", "/raise")
    u, m = out["uvicorn"][0], out["m0serve"][0]
    assert u.status == 500 and view(m) == view(u), f"\nuvicorn: {u!r}\nm0serve: {m!r}"


@pytest.mark.parametrize("path", ["/bare/raise", "/bare/noresponse"])
def test_app_failing_before_a_response_is_500(servers, path):
    """The server's own 500: status and content type match (the body: see
    test_server_500_body)."""
    out = both_raw(servers, "GET", path)
    u, m = out["uvicorn"][0], out["m0serve"][0]
    assert u.status == m.status == 500, f"\nuvicorn: {u!r}\nm0serve: {m!r}"
    assert u.complete and m.complete
    assert m.header("content-type") == u.header("content-type") == "text/plain; charset=utf-8"
    assert u.body.rstrip(b"\n") == m.body.rstrip(b"\n") == b"Internal Server Error"


M0SERVE_500 = b"Internal Server Error\n"  # as from the WSGI bridge


@pytest.mark.parametrize("path", ["/bare/raise", "/bare/noresponse"])
def test_documented_server_500_body(servers, path):
    """docs/asgi.md, Coming from uvicorn: "The 500 for a failed application
    is Internal Server Error\\n ... on a connection kept alive; uvicorn's has
    no newline and connection: close"."""
    out = both_raw(servers, "GET", path)
    u, m = out["uvicorn"][0], out["m0serve"][0]
    assert u.status == m.status == 500 and u.complete and m.complete, f"\nuvicorn: {u!r}\nm0serve: {m!r}"
    assert u.header("content-type") == m.header("content-type") == "text/plain; charset=utf-8"
    assert u.body == b"Internal Server Error" and u.header_values("content-length") == ["21"], u
    assert u.header_values("connection") == ["close"], u
    assert m.body == M0SERVE_500 and m.header_values("content-length") == ["22"], m
    assert m.header_values("connection") == [], m


@pytest.mark.parametrize("path", ["/bare/raise", "/bare/noresponse", "/raise"])
def test_documented_connection_after_an_app_error(servers, path):
    """docs/asgi.md, Coming from uvicorn: "... uvicorn closes the connection
    after any application error" (also after Starlette's own complete 500,
    /raise, whose head says nothing of it); m0serve keeps the connection
    alive."""
    out = both_raw(servers, "GET", path, then_eof=True)
    (u, u_closed), (m, m_closed) = out["uvicorn"], out["m0serve"]
    assert u.status == m.status == 500 and u.complete and m.complete, f"\nuvicorn: {u!r}\nm0serve: {m!r}"
    assert u_closed, u
    assert not m_closed and m.header("connection") is None, m
    if path == "/raise":
        assert u.header("connection") is None, u


def test_documented_app_returning_after_the_start_only(servers):
    """docs/asgi.md, Coming from uvicorn: "An application that sends
    http.response.start and returns gets a complete 500 (its head was not
    on the wire yet); uvicorn has sent the head and closes the connection
    mid-body": a 200, chunked, with no last chunk."""
    data = http_request("GET", "/bare/start-only", 0, [("Host", VHOST)])
    u, u_next = raw_exchange_then_next(servers["uvicorn"], data)
    m, m_next = raw_exchange_then_next(servers["m0serve"], data)
    assert u.status == 200 and u.chunked and u.header("content-type") == "text/plain", u
    assert u.body == b"" and not u.complete and u.eof, u
    assert u_next.status is None and u_next.eof, u_next
    assert m.status == 500 and m.complete and m.body == M0SERVE_500, m
    assert m.header("content-type") == "text/plain; charset=utf-8", m
    # the connection kept alive, as after the other application errors
    assert m_next.status == 200 and m_next.complete, m_next


def test_app_raising_after_the_start_truncates(servers):
    out = both_raw(servers, "GET", "/bare/raise-after-start", then_eof=True)
    for name, (resp, closed) in out.items():
        assert resp.status == 200 and resp.chunked and resp.body == b"partial\n", f"{name}: {resp!r}"
        assert not resp.complete and closed, f"{name}: {resp!r}"


# --------------------------------------------------------------------------
# requests the servers parse differently


def test_malformed_request_line_is_400(servers):
    out = {name: raw_exchange(s, b"GARBAGE\r\n\r\n", then_eof=True) for name, s in servers.items()}
    for name, (resp, closed) in out.items():
        assert resp.status == 400 and closed, f"{name}: {resp!r}"


UVICORN_400 = b"Invalid HTTP request received."
M0SERVE_400 = b"Bad Request: "  # and the reason


def assert_uvicorn_400(resp, closed):
    """uvicorn's own 400 for a request its parser (httptools) refuses."""
    assert resp.status == 400 and resp.reason == "Bad Request" and resp.complete, resp
    assert resp.body == UVICORN_400 and resp.header("content-type") == "text/plain; charset=utf-8", resp
    assert resp.header_values("connection") == ["close"] and closed, resp


def assert_m0serve_400(resp, closed, reason):
    """m0serve's own 400 for a request its strict reading refuses."""
    assert resp.status == 400 and resp.reason == "Bad Request" and resp.complete, resp
    assert resp.body == M0SERVE_400 + reason + b"\n" and resp.header("content-type") == "text/plain; charset=utf-8", resp
    assert resp.header_values("connection") == ["close"] and closed, resp


def test_documented_malformed_request_body_text(servers):
    """docs/asgi.md, Coming from uvicorn: "Malformed requests are refused by
    the server's parser with its own Bad Request body" ('Bad Request\\n';
    uvicorn's: 'Invalid HTTP request received.')."""
    out = {name: raw_exchange(s, b"GARBAGE\r\n\r\n", then_eof=True) for name, s in servers.items()}
    assert_uvicorn_400(*out["uvicorn"])
    assert_m0serve_400(*out["m0serve"], b"malformed request line")


@pytest.mark.parametrize("target", [b"/raw/\xc3\xa9", b"/raw/x?q=caf\xc3\xa9"], ids=["path", "query"])
def test_documented_unencoded_non_ascii_target(servers, target):
    """docs/asgi.md, Coming from uvicorn: raw UTF-8 in the request target is
    refused by both (RFC 9112 3.2: a target is URI characters): uvicorn with
    its 400, m0serve with its own, the connection closed."""
    data = b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    assert_uvicorn_400(*raw_exchange(servers["uvicorn"], data, then_eof=True))
    assert_m0serve_400(*raw_exchange(servers["m0serve"], data, then_eof=True), b"malformed request target")


def test_documented_request_header_trailing_whitespace(servers):
    """docs/asgi.md, Coming from uvicorn: "Trailing whitespace in a header
    value is trimmed, as RFC 9110 says; uvicorn keeps it" (the leading
    whitespace both drop). 'X-B:  padded ' is sent."""
    out = both_raw(servers, "GET", "/headers/echo", [("X-B", " padded ")])
    u, m = out["uvicorn"][0], out["m0serve"][0]
    assert u.status == m.status == 200, f"\nuvicorn: {u!r}\nm0serve: {m!r}"
    assert json.loads(u.body)["headers"] == [["host", VHOST], ["x-b", "padded "]]
    assert json.loads(m.body)["headers"] == [["host", VHOST], ["x-b", "padded"]]


def test_documented_content_length_and_chunked_together(servers):
    """docs/asgi.md, Coming from uvicorn: "a request with both Content-Length
    and Transfer-Encoding: chunked (400 from both)", the connection closed."""
    data = (b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"3\r\nabc\r\n0\r\n\r\n")
    out = {name: raw_exchange(s, data, "POST", then_eof=True) for name, s in servers.items()}
    assert_uvicorn_400(*out["uvicorn"])
    assert_m0serve_400(*out["m0serve"], b"both Content-Length and Transfer-Encoding")


def test_documented_http_1_1_without_host(servers):
    """docs/asgi.md, Coming from uvicorn: "an HTTP/1.1 request without Host
    (400, as RFC 9112 asks; uvicorn serves it)", with m0serve's own Bad
    Request body, the connection closed."""
    data = b"GET /json HTTP/1.1\r\n\r\n"
    u, _ = raw_exchange(servers["uvicorn"], data)
    assert u.status == 200 and u.complete and json.loads(u.body)["hello"] == "world", u
    assert_m0serve_400(*raw_exchange(servers["m0serve"], data, then_eof=True), b"missing Host")


def test_documented_app_date_header_is_replaced(servers):
    """docs/asgi.md, Coming from uvicorn: "A Date header from the
    application is replaced by the server's; uvicorn sends both" (its own
    first)."""
    out = both_raw(servers, "GET", "/bare/server-header")
    u, m = out["uvicorn"][0], out["m0serve"][0]
    assert u.status == m.status == 200 and u.body == m.body == b"own server header\n"
    app_date = "Thu, 01 Jan 1970 00:00:00 GMT"
    u_dates, m_dates = u.header_values("date"), m.header_values("date")
    assert len(u_dates) == 2 and u_dates[0] != app_date and u_dates[1] == app_date, u
    assert len(m_dates) == 1 and m_dates[0] != app_date and m_dates[0].endswith(" GMT"), m


# --------------------------------------------------------------------------
# WebSocket


def ws_url(server, path):
    return f"ws://{server.host}:{server.port}{path}"


def test_websocket_echo(servers):
    got = {}
    for name, server in servers.items():
        with ws_connect(ws_url(server, "/raw/ws?x=1"), compression=None, subprotocols=["chat", "other"],
                        open_timeout=HTTP_TIMEOUT) as ws:
            seen = [ws.subprotocol, ws.response.status_code]
            for msg in ["hello", "caf\u00e9", b"\x00\x01\xff", "x" * 200000, b""]:
                ws.send(msg)
                seen.append(ws.recv(timeout=HTTP_TIMEOUT))
            ws.send("scope")
            scope = json.loads(ws.recv(timeout=HTTP_TIMEOUT))
            scope["headers"] = [h for h in scope["headers"] if h[0] not in ("sec-websocket-key", "host")]
            scope["client"][1] = scope["server"][1] = "PORT"
            scope["asgi"].pop("spec_version")  # test_documented_websocket_scope_spec_version
            seen.append(scope)
            ws.send("close")
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=HTTP_TIMEOUT)
            seen.append((closed.value.rcvd.code, closed.value.rcvd.reason))
        got[name] = seen
    assert got["m0serve"] == got["uvicorn"]
    assert got["uvicorn"][0] == "chat" and got["uvicorn"][-1] == (4001, "asked to")


def ws_scope(server):
    with ws_connect(ws_url(server, "/raw/ws"), compression=None, open_timeout=HTTP_TIMEOUT) as ws:
        ws.send("scope")
        return json.loads(ws.recv(timeout=HTTP_TIMEOUT))


def test_documented_websocket_scope_spec_version(servers):
    """docs/asgi.md, Coming from uvicorn: a WebSocket scope says spec_version
    2.5 (websocket.disconnect carries the peer's reason); uvicorn, which
    sends the reason too, says 2.4. An HTTP scope says 2.3 from both
    (test_http_scope)."""
    got = {name: ws_scope(s)["asgi"] for name, s in servers.items()}
    assert got["uvicorn"] == {"version": "3.0", "spec_version": "2.4"}
    assert got["m0serve"] == {"version": "3.0", "spec_version": "2.5"}


def ws_denial(server, path="/raw/deny"):
    with pytest.raises(InvalidStatus) as denied:
        ws_connect(ws_url(server, path), open_timeout=HTTP_TIMEOUT)
    r = denied.value.response
    return {"status": r.status_code, "headers": norm_headers(r.headers.raw_items()), "body": bytes(r.body)}


def test_websocket_close_before_accept_is_403(servers):
    got = {name: ws_denial(s) for name, s in servers.items()}
    assert got["uvicorn"]["status"] == got["m0serve"]["status"] == 403


def test_documented_websocket_close_before_accept(servers):
    """docs/asgi.md, Coming from uvicorn: "A WebSocket closed before it is
    accepted gets a 403 with a body (Forbidden) and the connection is
    kept; uvicorn's is empty, with connection: close" (and uvicorn closes
    the connection)."""
    got = {name: ws_denial(s) for name, s in servers.items()}
    assert got["uvicorn"] == {"status": 403, "body": b"", "headers": [
        ("connection", "close"), ("content-length", "0"), ("content-type", "text/plain; charset=utf-8")]}
    assert got["m0serve"] == {"status": 403, "body": b"Forbidden\n", "headers": [
        ("content-length", "10"), ("content-type", "text/plain; charset=utf-8"),
        ("x-content-type-options", "nosniff")]}
    upgrade = http_request("GET", "/raw/deny", 0, [
        ("Host", VHOST), ("Upgrade", "websocket"), ("Connection", "Upgrade"),
        ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="), ("Sec-WebSocket-Version", "13")])
    u, u_next = raw_exchange_then_next(servers["uvicorn"], upgrade)
    m, m_next = raw_exchange_then_next(servers["m0serve"], upgrade)
    assert u.status == 403 and u.complete and u_next.status is None and u_next.eof, (u, u_next)
    assert m.status == 403 and m.complete and m_next.status == 200 and m_next.complete, (m, m_next)


# --------------------------------------------------------------------------
# documented differences


@pytest.fixture(scope="module")
def m0_small_body(serve_module):
    return serve_module(SPEC, args=["--max-body", "1k"])


def test_documented_max_body_413_before_the_app(servers, m0_small_body):
    """1. A body over --max-body: m0serve answers 413 and the app never
    runs; uvicorn has no cap and the app gets the body."""
    body = b"b" * 2048
    m = both_raw({"m0serve": m0_small_body}, "POST", "/bare/s", body=body)["m0serve"][0]
    assert m.status == 413, m
    assert b"body_sha256" not in m.body
    u = both_raw({"uvicorn": servers["uvicorn"]}, "POST", "/bare/s", body=body)["uvicorn"][0]
    assert u.status == 200 and json.loads(u.body)["body_length"] == 2048, u
    # Under the cap the same server passes the body on.
    ok = both_raw({"m0serve": m0_small_body}, "POST", "/bare/s", body=b"b" * 1024)["m0serve"][0]
    assert ok.status == 200 and json.loads(ok.body)["body_length"] == 1024, ok


def test_documented_underscore_headers_are_kept_as_uvicorn_keeps_them(servers):
    """2. Under the executor m0serve delivers a header whose name holds an
    underscore beside its hyphenated twin, as uvicorn does: the same.
    (scope["client"] differs here: uvicorn applies X-Forwarded-For, see 3.)"""
    headers = [("X_Forwarded_For", "evil"), ("X-Forwarded-For", "proxy")]
    out = both_raw(servers, "GET", "/bare/s", headers)
    got = {name: json.loads(resp.body)["headers"] for name, (resp, _) in out.items()}
    assert got["m0serve"] == got["uvicorn"] == [["host", VHOST], ["x_forwarded_for", "evil"],
                                                ["x-forwarded-for", "proxy"]]


def test_documented_forwarded_headers_are_not_applied(servers):
    """3. From 127.0.0.1 uvicorn applies X-Forwarded-For/-Proto (its
    --forwarded-allow-ips default trusts it); m0serve leaves the scope alone."""
    headers = [("X-Forwarded-For", "1.2.3.4"), ("X-Forwarded-Proto", "https")]
    out = both_raw(servers, "GET", "/bare/s", headers)
    u, m = (json.loads(out[name][0].body) for name in ("uvicorn", "m0serve"))
    assert u["client"][0] == "1.2.3.4" and u["scheme"] == "https"
    assert m["client"][0] == "127.0.0.1" and m["scheme"] == "http"
    # The headers themselves reach the application from both.
    for s in (u, m):
        assert ["x-forwarded-for", "1.2.3.4"] in s["headers"] and ["x-forwarded-proto", "https"] in s["headers"]


def test_documented_failed_lifespan_startup_exit_codes(tmp_path):
    """4. A lifespan startup that fails: m0serve exits 1, uvicorn exits 3."""
    spec = "asgi_diff_app:failing_startup"
    uv = Uvicorn(spec, tmp_path).start()
    m0 = subprocess.Popen([str(M0SERVE), "--host", HOST, "--port", str(free_port()), "--app-dir", str(APPS), spec],
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}, start_new_session=True)
    try:
        uv_rc = uv.proc.wait(timeout=20)
        m0_out, m0_err = m0.communicate(timeout=20)
    finally:
        for p in (uv.proc, m0):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
    assert uv_rc == 3, uv.describe()
    assert m0.returncode == 1, (m0_out, m0_err)
    assert b"startup refused" in m0_err and "startup refused" in uv.stderr


def test_documented_server_header(servers):
    """5. uvicorn adds `server: uvicorn`; m0serve sends no Server header,
    only the application's own."""
    out = both_raw(servers, "GET", "/json")
    assert out["uvicorn"][0].header_values("server") == ["uvicorn"]
    assert out["m0serve"][0].header_values("server") == []
    out = both_raw(servers, "GET", "/bare/server-header")
    assert out["uvicorn"][0].header_values("server") == ["uvicorn", "app-server/1.0"]
    assert out["m0serve"][0].header_values("server") == ["app-server/1.0"]


def test_documented_http_1_0_stream_is_not_chunked(servers):
    """docs/asgi.md: a streamed body to an HTTP/1.0 client comes as it is
    sent, the connection closing after the last part; uvicorn chunks it."""
    out = both_raw(servers, "GET", "/stream", version="HTTP/1.0", then_eof=True)
    (u, u_closed), (m, m_closed) = out["uvicorn"], out["m0serve"]
    body = b"".join(b"chunk %d\n" % i for i in range(5))
    assert u.chunked and u.complete and u.body == body, u
    assert u.header("connection") == "close" and u_closed, u
    assert not m.chunked and m.header("transfer-encoding") is None, m
    assert m.header("content-length") is None and m.header("connection") == "close", m
    assert m.body == body and m.eof and m.complete, m


def test_websocket_denial_response_extension(servers):
    """The WebSocket Denial Response extension: both offer it in the scope,
    and both send the application's own response to a handshake it
    refuses with one, its body sent in parts."""
    scopes = {name: ws_scope(s) for name, s in servers.items()}
    assert scopes["uvicorn"]["extensions"] == scopes["m0serve"]["extensions"] == {"websocket.http.response": {}}
    got = {name: ws_denial(s, "/raw/deny-response") for name, s in servers.items()}
    for name, r in got.items():
        assert r["status"] == 401 and r["body"] == b"log in first\n", (name, r)
        assert ("x-why", "no token") in r["headers"] and ("content-type", "text/plain") in r["headers"], (name, r)


def test_documented_websocket_compression_not_negotiated(servers):
    """docs/asgi.md, not supported: per-message compression. uvicorn
    accepts the client's permessage-deflate offer; m0serve declines it."""
    got = {}
    for name, server in servers.items():
        with ws_connect(ws_url(server, "/raw/ws"), open_timeout=HTTP_TIMEOUT) as ws:
            got[name] = ws.response.headers.get("Sec-WebSocket-Extensions")
            ws.send("hi" * 1000)
            assert ws.recv(timeout=HTTP_TIMEOUT) == "hi" * 1000
    assert got["uvicorn"].startswith("permessage-deflate")
    assert got["m0serve"] is None
