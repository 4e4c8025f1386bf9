"""ASGI over HTTP: the scope, receive(), send(), errors and discovery.

Served by apps/asgi_raw.py, a framework-free ASGI application, so every
message the server hands over (and takes back) is visible.
"""

import concurrent.futures
import json
import os
import subprocess
import sys
import time
import uuid

import httpx
import pytest
import requests

from conftest import APPS, FRONT_ENDS, HOST, INVERTED, HTTP_TIMEOUT, READY_PREFIX, READY_RE, RawReader, http_request, \
    read_response, serve_on, wait_until

# Every test here serves an ASGI application: a free-threaded build refuses it.
pytestmark = pytest.mark.gil

DISCOVERY = APPS / "discovery"
EXIT_TIMEOUT = 20
DEFAULT_MAX_BODY = 4 << 20  # m0serve --help: --max-body default 4m


@pytest.fixture(scope="module")
def server(serve_module):
    return serve_module("asgi_raw:application")


def events(server, key):
    return server.get_json(f"/events?id={key}")


def pattern(n):
    return (bytes(range(251)) * (n // 251 + 1))[:n]


# --------------------------------------------------------------------------
# the banner and the loop


def test_banner_names_asgi_and_the_event_loop(server):
    loop = "inverted" if INVERTED else "pump"
    assert server.ready_line == (f"🔥 m0serve: asgi_raw:application on http://{HOST}:{server.port} "
                                 f"(protocol=asgi workers=1) loop={loop} event-loop=uvloop")
    # The banner tells the truth about the loop the application runs on.
    assert server.get("/loop").text == "uvloop"


@pytest.mark.parametrize("how", ["flag", "env"])
def test_loop_asyncio_is_forced_by_flag_or_env(serve, how):
    if how == "flag":
        s = serve("asgi_raw:application", args=("--loop", "asyncio"))
    else:
        s = serve("asgi_raw:application", env={"M0_LOOP": "asyncio"})
    m = READY_RE.match(s.ready_line)
    assert m and m["protocol"] == "asgi" and m["loop"] == "asyncio", s.ready_line
    assert s.get("/loop").text.startswith("asyncio"), s.get("/loop").text
    assert s.get_json("/state")["greeting"] == "hello from lifespan"


@pytest.fixture(scope="module")
def python_without_uvloop(tmp_path_factory):
    """A virtualenv of this CPython without uvloop (nor anything else)."""
    venv = tmp_path_factory.mktemp("no-uvloop") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    probe = subprocess.run([str(venv / "bin" / "python"), "-c", "import uvloop"],
                           capture_output=True, timeout=60)
    assert probe.returncode != 0, "uvloop is importable from a fresh virtualenv"
    return venv / "bin"


def test_loop_auto_without_uvloop_is_asyncio(serve, python_without_uvloop):
    s = serve("asgi_raw:application", env={"PATH": f"{python_without_uvloop}:{os.environ['PATH']}"})
    m = READY_RE.match(s.ready_line)
    assert m and m["loop"] == "asyncio", s.ready_line
    assert s.get("/loop").text.startswith("asyncio")


def test_loop_uvloop_without_uvloop_exits_78(serve, python_without_uvloop):
    s = serve("asgi_raw:application", wait=False, args=("--loop", "uvloop"),
              env={"PATH": f"{python_without_uvloop}:{os.environ['PATH']}"})
    rc = s.wait_exit(EXIT_TIMEOUT)
    assert rc == 78, s.describe()
    assert "uvloop" in s.stderr, s.describe()
    assert READY_PREFIX not in s.stdout


# --------------------------------------------------------------------------
# the scope


def test_http_scope(server):
    r = server.get("/scope/a%20b/%E2%82%AC?x=1&y=%20&z", headers={"X-Custom": "Value One"})
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/json"
    scope = r.json()
    assert scope["type"] == "http"
    assert scope["asgi"] == {"version": "3.0", "spec_version": "2.3"}
    assert scope["http_version"] == "1.1"
    assert scope["method"] == "GET"
    assert scope["scheme"] == "http"
    assert scope["path"] == "/scope/a b/€"
    assert scope["raw_path"] == "/scope/a%20b/%E2%82%AC"
    assert scope["query_string"] == "x=1&y=%20&z"
    assert scope["root_path"] == ""
    assert scope["client"][0] == "127.0.0.1" and 0 < scope["client"][1] < 65536
    assert scope["server"] == [HOST, server.port]
    assert scope["extensions"] == {"http.response.pathsend": {}}
    assert scope["state"]["greeting"] == "hello from lifespan"
    assert ["x-custom", "Value One"] in scope["headers"]
    assert ["host", f"{HOST}:{server.port}"] in scope["headers"]
    assert scope["_types"] == {
        "raw_path": "bytes", "query_string": "bytes", "headers": "list",
        "header_item": ["tuple"], "header_parts": ["bytes"], "client": "tuple", "server": "tuple",
    }


def test_scope_client_port_is_the_clients(server):
    with server.connect() as sock:
        port = sock.getsockname()[1]
        sock.sendall(http_request("GET", "/scope", server.port, headers=[("Connection", "close")]))
        resp = read_response(RawReader(sock))
    assert resp.status == 200, resp
    assert json.loads(resp.body)["client"] == ["127.0.0.1", port]


def test_headers_keep_order_repeats_and_spelling(server):
    resp = server.raw("GET", "/scope", headers=[
        ("X-A", "1"), ("x-a", "2"), ("X-B", "3"), ("X-A", "4"),
        ("X_Foo", "under"), ("X-Foo", "dash"), ("UPPER-CASE", "Kept As Sent"),
    ])
    assert resp.status == 200, resp
    headers = [tuple(h) for h in json.loads(resp.body)["headers"]]
    assert headers == [
        ("host", f"{HOST}:{server.port}"),
        ("x-a", "1"), ("x-a", "2"), ("x-b", "3"), ("x-a", "4"),
        ("x_foo", "under"), ("x-foo", "dash"), ("upper-case", "Kept As Sent"),
    ]


def test_header_values_are_the_bytes_sent(server):
    # http_request encodes latin-1: "Ã©" goes out as the UTF-8 bytes of "é".
    resp = server.raw("GET", "/scope", headers=[("X-Utf8", "caf\u00c3\u00a9"), ("X-Spaces", "a  b")])
    headers = dict(tuple(h) for h in json.loads(resp.body)["headers"])
    assert headers["x-utf8"].encode("latin-1") == "café".encode()
    assert headers["x-spaces"] == "a  b"


def test_undecodable_path_is_replaced_raw_path_kept(server):
    scope = json.loads(server.raw("GET", "/scope/%FF%C3%A9").body)
    assert scope["path"] == "/scope/\ufffdé"
    assert scope["raw_path"] == "/scope/%FF%C3%A9"


def test_raw_path_keeps_encoded_slashes(server):
    scope = json.loads(server.raw("GET", "/scope/a%2Fb?q=%2F").body)
    assert scope["path"] == "/scope/a/b"
    assert scope["raw_path"] == "/scope/a%2Fb"
    assert scope["query_string"] == "q=%2F"


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS", "PURGE"])
def test_method(server, method):
    resp = server.raw(method, "/scope")
    assert resp.status == 200, resp
    assert json.loads(resp.body)["method"] == method


def test_http_1_0_request(server):
    resp = server.raw("GET", "/scope", version="HTTP/1.0")
    assert resp.status == 200, resp
    scope = json.loads(resp.body)
    assert scope["http_version"] == "1.0"
    assert scope["headers"] == [["host", f"{HOST}:{server.port}"]]


def test_http_1_0_streamed_response_is_not_chunked(server):
    """RFC 9112 6.1: no Transfer-Encoding to an HTTP/1.0 client; the body
    ends when the connection closes (the WSGI side does exactly this)."""
    resp = server.raw("GET", "/stream?n=3", version="HTTP/1.0")
    assert resp.status == 200 and resp.version == "HTTP/1.0", resp
    assert resp.header("Transfer-Encoding") is None, resp
    assert resp.body == b"chunk 0\nchunk 1\nchunk 2\n" and resp.eof, resp


def test_state_is_a_copy_per_request(server):
    first = server.get_json("/state")
    assert first["greeting"] == "hello from lifespan"
    assert "mutated_by_request" not in first
    # /state wrote into its copy; the next request gets the lifespan's state again.
    second = server.get_json("/state")
    assert second == first


# --------------------------------------------------------------------------
# receive()


def test_echo_small_body(server):
    r = server.post("/echo", data=b"hello asgi")
    assert r.status_code == 200
    assert r.content == b"hello asgi"
    assert r.headers["X-Chunks"] == "1"


def test_request_without_body_is_one_empty_message(server):
    assert server.get_json("/chunks") == [[0, False]]


def test_large_body_arrives_in_chunks(server):
    body = pattern(1_000_000)
    r = server.post("/chunks", data=body)
    assert r.status_code == 200
    chunks = r.json()
    assert sum(n for n, _ in chunks) == len(body)
    assert len(chunks) > 1, chunks
    assert [more for _, more in chunks] == [True] * (len(chunks) - 1) + [False]
    echoed = server.post("/echo", data=body)
    assert echoed.content == body


def test_chunked_request_body(server):
    def gen():
        yield b"hello "
        yield b"chunked "
        yield b"world"

    r = server.post("/echo", data=gen())
    assert r.status_code == 200
    assert r.content == b"hello chunked world"


def test_body_at_the_cap_is_accepted(server):
    body = pattern(DEFAULT_MAX_BODY)
    r = server.post("/echo", data=body)
    assert r.status_code == 200
    assert r.content == body


def test_body_over_the_cap_is_413_before_the_app_runs(server):
    key = uuid.uuid4().hex
    mark = server.mark()
    # Headers only: the server must refuse on Content-Length, without the body.
    with server.connect() as sock:
        sock.sendall(http_request("POST", f"/echo?id={key}", server.port,
                                  headers=[("Content-Length", str(DEFAULT_MAX_BODY + 1))]))
        resp = read_response(RawReader(sock))
    assert resp.status == 413, resp
    r = server.post(f"/echo?id={key}x", data=pattern(DEFAULT_MAX_BODY + 1))
    assert r.status_code == 413
    assert events(server, key) == [] and events(server, key + "x") == []
    server.wait_for_stderr(r"max-body", since=mark)
    assert server.get("/echo").status_code == 200


@pytest.fixture(scope="module")
def small_server(serve_module):
    return serve_module("asgi_raw:application", args=("--max-body", "64k"))


def test_max_body_flag(small_server):
    assert small_server.post("/echo", data=pattern(65536)).content == pattern(65536)
    key = uuid.uuid4().hex
    r = small_server.post(f"/echo?id={key}", data=pattern(65537))
    assert r.status_code == 413
    assert events(small_server, key) == []


def test_disconnect_after_the_response(server):
    key = uuid.uuid4().hex
    r = server.get(f"/after-response?id={key}")
    assert r.status_code == 200 and r.text == "answered\n"
    assert wait_until(lambda: events(server, key), 5, "the receive() after the response") == ["http.disconnect"]


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_an_answer_goes_out_while_the_task_still_holds_the_loop(serve, front_end):
    # The loop gives Go one wake-up a turn, after the turn; a task that
    # blocks after sending its answer (a blocking call in an async
    # background job) keeps the loop from the turn's end. Its answer still
    # goes out within the sweeper's bound, as uvicorn's does before the block.
    s = serve_on(serve, front_end, "asgi_raw:application")
    s.get("/")  # warm
    started = time.monotonic()
    r = s.get("/block-after-response?s=2")
    took = time.monotonic() - started
    assert r.status_code == 200 and r.text == "answered before the block\n"
    assert took < 1.0, f"the answer waited {took:.2f} s for the task's blocking call"


def test_disconnect_when_the_client_leaves_mid_stream(server):
    key = uuid.uuid4().hex
    with server.connect() as sock:
        sock.sendall(http_request("GET", f"/forever?id={key}", server.port))
        reader = RawReader(sock)
        assert reader.read_until(b"tick 1\n") is not None, reader.raw
    assert wait_until(lambda: events(server, key) == ["http.disconnect", "stream ended"], 8,
                      lambda: f"http.disconnect after the client left; recorded {events(server, key)}")


# --------------------------------------------------------------------------
# send()


def test_response_headers_and_status(server):
    resp = server.raw("GET", "/headers-out")
    assert resp.status == 201 and resp.reason == "Created", resp
    assert resp.header_values("Set-Cookie") == ["a=1; Path=/", "b=2; Path=/"]
    assert resp.header("X-Custom") == "custom value"
    assert resp.header("Content-Type") == "text/plain"
    assert resp.header("Content-Length") == "12"
    assert resp.body == b"two cookies\n"


def test_no_content_type_is_added(server):
    r = server.get("/status?code=200")
    assert r.status_code == 200 and r.content == b""
    assert "Content-Type" not in r.headers, r.headers


def test_streaming_is_chunked_without_content_length(server):
    resp = server.raw("GET", "/stream?n=4&delay=0.05")
    assert resp.status == 200 and resp.complete, resp
    assert resp.chunked and resp.header("Content-Length") is None, resp
    assert resp.body == b"chunk 0\nchunk 1\nchunk 2\nchunk 3\n"
    assert resp.raw.endswith(b"0\r\n\r\n")


def test_endless_stream_reaches_the_client(server):
    """The first part of a stream that never ends arrives: nothing buffers it."""
    key = uuid.uuid4().hex
    with httpx.Client(timeout=HTTP_TIMEOUT) as client:
        with client.stream("GET", server.url(f"/forever?id={key}")) as r:
            assert r.status_code == 200
            assert r.headers["content-type"] == "text/event-stream"
            lines = r.iter_lines()
            assert [next(lines) for _ in range(3)] == ["tick 0", "tick 1", "tick 2"]


@pytest.mark.parametrize("size", [0, 1, 100_000, 5_000_000])
def test_big_response_in_one_message(server, size):
    r = server.get(f"/big?size={size}")
    assert r.status_code == 200
    assert r.headers["Content-Length"] == str(size)
    assert r.content == pattern(size)


def test_backpressure_holds_a_fast_stream_until_the_client_leaves(server):
    """50 MB streamed to a client that reads 200 KB and stops: the app's
    sends wait (it cannot have sent it all), and return once the client
    is gone, so the app finishes."""
    key = uuid.uuid4().hex
    with server.connect() as sock:
        sock.sendall(http_request("GET", f"/big-stream?size=50000000&id={key}", server.port))
        reader = RawReader(sock)
        assert len(reader.read_exact(200_000)) == 200_000, reader.raw[:300]
        with pytest.raises(AssertionError):  # the app stays held while the client does not read
            wait_until(lambda: events(server, key), 1, "the app to send 50 MB to a client that stopped reading")
    assert wait_until(lambda: events(server, key), 8, "the app to finish after the client left") == ["sent it all"]


@pytest.mark.parametrize("length", [None, "23"], ids=["chunked", "content-length"])
def test_each_streamed_part_reaches_the_client_before_the_next_is_sent(server, length):
    """The app sends its first part and waits for the client to say it has
    it (through /gate) before sending the second: a server that holds parts
    back leaves the client waiting for the first."""
    key = uuid.uuid4().hex
    path = f"/gated-stream?key={key}" + (f"&cl={length}" if length else "")
    with server.connect() as sock:
        sock.sendall(http_request("GET", path, server.port))
        reader = RawReader(sock, timeout=5)
        first = reader.read_until(b"first part\n")
        if first is None:
            server.get(f"/gate?key={key}")  # let the app finish
        assert first is not None, f"the first part did not arrive while the app waited: {reader.raw!r}"
        assert server.get(f"/gate?key={key}").text == "opened\n"
        reader.deadline += HTTP_TIMEOUT
        assert reader.read_until(b"second part\n") is not None, reader.raw
    assert (b"Content-Length: " + length.encode() in reader.raw) if length else (b"chunked" in reader.raw)


@pytest.mark.parametrize("parts, sent, word", [
    ("hello,wor", b"hellowor", "shorter"),
    ("hello,world,extra", b"helloworld", "longer"),
], ids=["shorter", "longer"])
def test_streamed_body_not_matching_its_content_length(server, parts, sent, word):
    """The app names 10 bytes and streams 8 or 15: the client gets the head
    and at most the 10 bytes named, the connection closes (a short body is
    seen as truncated), and the mismatch is logged."""
    mark = server.mark()
    with server.connect() as sock:
        sock.sendall(http_request("GET", f"/length?cl=10&parts={parts}", server.port)
                     + http_request("GET", "/head", server.port))
        reader = RawReader(sock)
        resp = read_response(reader)
        closed = reader.at_eof(wait=5)
    assert resp.status == 200 and resp.header("Content-Length") == "10", resp
    assert resp.body == sent, resp
    assert resp.complete == (len(sent) == 10), resp
    assert closed, f"the connection stayed open after the mismatch: {reader.raw!r}"
    lines = server.wait_for_stderr(r"asgi: application error", since=mark)
    assert len(lines) == 1 and "path=/length" in lines[0], lines
    assert f"{word} than the Content-Length" in lines[0], lines[0]


def test_app_connection_close_header_closes_the_connection(server):
    with server.connect() as sock:
        sock.sendall(http_request("GET", "/length?cl=5&parts=hello&close=1", server.port)
                     + http_request("GET", "/head", server.port))
        reader = RawReader(sock)
        resp = read_response(reader)
        assert resp.status == 200 and resp.body == b"hello", resp
        assert resp.header("Connection") == "close"
        assert reader.at_eof(wait=5), f"the connection stayed open: {reader.raw!r}"


def test_big_streamed_response(server):
    size = 5_000_000
    resp = server.raw("GET", f"/big-stream?size={size}")
    assert resp.status == 200 and resp.complete and resp.chunked, resp
    assert resp.body == pattern(size)


@pytest.mark.parametrize("path, length", [
    ("/head", "11"),
    ("/big?size=100000", "100000"),
    ("/stream", None),
])
def test_head_sends_no_body(server, path, length):
    """A HEAD answer carries no body bytes: the next response on the same
    connection parses cleanly."""
    with server.connect() as sock:
        sock.sendall(http_request("HEAD", path, server.port) + http_request("GET", "/head", server.port))
        reader = RawReader(sock)
        head = read_response(reader, method="HEAD")
        after = read_response(reader)
    assert head.status == 200, head
    assert head.header("Content-Length") == length, head
    assert after.status == 200 and after.body == b"hello world", after


@pytest.mark.parametrize("code", [204, 304])
def test_status_without_body(server, code):
    with server.connect() as sock:
        sock.sendall(http_request("GET", f"/status?code={code}", server.port)
                     + http_request("GET", "/head", server.port))
        reader = RawReader(sock)
        first = read_response(reader)
        after = read_response(reader)
    assert first.status == code, first
    assert first.header("Transfer-Encoding") is None, first
    assert after.status == 200 and after.body == b"hello world", after


def test_keep_alive_across_kinds_of_response(server):
    ports = set()
    with requests.Session() as s:
        for path in ["/scope", "/stream?n=2", "/big?size=70000", "/headers-out", "/status?code=204"] * 2:
            r = s.get(server.url(path), timeout=HTTP_TIMEOUT)
            assert r.status_code in (200, 201, 204), (path, r.status_code)
            if path == "/scope":
                ports.add(r.json()["client"][1])
    assert len(ports) == 1, f"the connection was not kept alive: client ports {ports}"


def test_pathsend(server, tmp_path):
    data = pattern(300_000)
    f = tmp_path / "payload.bin"
    f.write_bytes(data)
    r = server.get(f"/pathsend?path={f}")
    assert r.status_code == 200
    assert r.headers["Content-Length"] == str(len(data))
    assert r.headers["Content-Type"] == "application/octet-stream"
    assert r.headers["X-Sent-By"] == "pathsend"
    assert r.content == data


def test_pathsend_head(server, tmp_path):
    f = tmp_path / "hello.txt"
    f.write_bytes(b"hello from a file\n")
    with server.connect() as sock:
        sock.sendall(http_request("HEAD", f"/pathsend?path={f}", server.port)
                     + http_request("GET", "/head", server.port))
        reader = RawReader(sock)
        head = read_response(reader, method="HEAD")
        after = read_response(reader)
    assert head.status == 200 and head.header("Content-Length") == "18", head
    assert after.status == 200 and after.body == b"hello world", after


def test_pathsend_missing_file_is_500(server, tmp_path):
    missing = tmp_path / "no-such-file"
    mark = server.mark()
    r = server.get(f"/pathsend?path={missing}")
    assert r.status_code == 500
    lines = server.wait_for_stderr(r"asgi: application error", since=mark)
    assert len(lines) == 1 and str(missing) in lines[0], lines


def test_requests_run_concurrently_on_the_loop(server):
    """Five requests that each wait for all five to be in the application:
    only a server that runs them at once can answer them."""
    key, n = uuid.uuid4().hex, 5
    with concurrent.futures.ThreadPoolExecutor(max_workers=n) as pool:
        futures = [pool.submit(requests.get, server.url(f"/barrier?key={key}&n={n}"), timeout=HTTP_TIMEOUT + 5)
                   for _ in range(n)]
        results = [f.result() for f in futures]
    assert [(r.status_code, r.text) for r in results] == [(200, "released\n")] * n


# --------------------------------------------------------------------------
# errors


@pytest.mark.parametrize("kind, logged", [
    ("before-start", "RuntimeError: boom before start"),
    ("after-start", "RuntimeError: boom after start"),
    ("no-response", "ASGI callable returned without starting response."),
    ("body-before-start", "Expected ASGI message 'http.response.start', but got 'http.response.body'."),
    ("double-start", "Expected ASGI message 'http.response.body', but got 'http.response.start'."),
    ("bad-header", "invalid HTTP header"),
])
def test_error_before_the_body_is_500(server, kind, logged):
    mark = server.mark()
    resp = server.raw("GET", f"/error/{kind}")
    assert resp.status == 500 and resp.complete, resp
    assert resp.body == b"Internal Server Error\n", resp
    assert resp.header("X-Injected") is None, resp
    records = server.wait_for_record(r"asgi: application error", since=mark)
    assert len(records) == 1, records
    assert f"path=/error/{kind}" in records[0], records[0]
    assert logged in records[0], records[0]
    if kind.endswith("start") and kind != "no-response":
        line, traceback = records[0].split("\n", 1)
        assert traceback.startswith("Traceback") and "asgi_raw.py" in traceback, records[0]
    assert server.get("/head").text == "hello world"


@pytest.mark.parametrize("kind, logged", [
    ("mid-stream", "RuntimeError: boom mid-stream"),
    ("incomplete", "ASGI callable returned without completing response."),
])
def test_error_after_the_body_started_truncates_it(server, kind, logged):
    mark = server.mark()
    resp = server.raw("GET", f"/error/{kind}")
    assert resp.status == 200 and resp.chunked, resp
    assert resp.body in (b"first chunk\n", b"partial\n"), resp
    assert not resp.timed_out, f"connection left open after the app failed mid-stream: {resp!r}"
    assert resp.eof, resp
    assert not resp.complete, f"the body ended with the last chunk, hiding the error: {resp!r}"
    assert not resp.raw.endswith(b"0\r\n\r\n")
    lines = server.wait_for_stderr(r"asgi: application error", since=mark)
    assert len(lines) == 1 and logged in lines[0], lines
    assert server.get("/head").text == "hello world"


@pytest.mark.parametrize("kind", ["no-response", "incomplete"])
def test_returned_without_a_response_is_logged_without_a_nul(server, kind):
    mark = server.mark()
    server.raw("GET", f"/error/{kind}")
    lines = server.wait_for_stderr(r"asgi: application error", since=mark)
    assert len(lines) == 1, lines
    assert "\\x00" not in lines[0] and "\x00" not in lines[0], lines[0]


def test_send_after_the_response_completed_raises_in_the_app(server):
    key = uuid.uuid4().hex
    r = server.get(f"/error/send-after-complete?id={key}")
    assert r.status_code == 200 and r.text == "complete\n"
    assert wait_until(lambda: events(server, key), 5, "the app's second send") == ["RuntimeError"]


def test_server_keeps_serving_after_errors(server):
    for kind in ["before-start", "mid-stream", "no-response", "body-before-start"] * 3:
        server.raw("GET", f"/error/{kind}")
    assert server.get("/head").text == "hello world"
    assert server.running


# --------------------------------------------------------------------------
# the access log


@pytest.fixture(scope="module")
def logged_server(serve_module):
    return serve_module("asgi_raw:application", args=("--access-log",))


def access_line(server, path_with_query):
    """The access log line of the one request to path_with_query (its query
    makes it unique), once it is written."""
    path = path_with_query.split("?")[0]

    def find():
        lines = [json.loads(line) for line in server.stdout.splitlines() if line.startswith("{")]
        return [line for line in lines if line.get("msg") == "access" and line["path"] == path]

    return wait_until(find, 5, f"an access line for {path}")


@pytest.mark.parametrize("path, status, size", [
    ("/big?size=12345", 200, 12345),
    ("/big-stream?size=300000", 200, 300000),
    ("/stream?n=3", 200, 24),
    ("/error/before-start", 500, 22),
    ("/status?code=204", 204, 0),
])
def test_access_log_of_asgi_responses(logged_server, path, status, size):
    r = logged_server.get(path)
    assert r.status_code == status
    lines = [line for line in access_line(logged_server, path) if line["bytes"] == size]
    assert lines and lines[-1]["status"] == status and lines[-1]["method"] == "GET", lines


def test_access_log_of_pathsend(logged_server, tmp_path):
    f = tmp_path / "logged.bin"
    f.write_bytes(pattern(4321))
    assert logged_server.get(f"/pathsend?path={f}").content == pattern(4321)
    lines = access_line(logged_server, "/pathsend")
    assert [(line["status"], line["bytes"]) for line in lines] == [(200, 4321)], lines


def test_access_log_of_a_websocket_says_101(logged_server):
    from websockets.sync.client import connect

    with connect(f"ws://{HOST}:{logged_server.port}/ws/return", open_timeout=HTTP_TIMEOUT) as conn:
        assert conn.response.status_code == 101
        assert conn.recv(timeout=HTTP_TIMEOUT) == "bye"
    lines = access_line(logged_server, "/ws/return")
    assert [line["status"] for line in lines] == [101], lines


# --------------------------------------------------------------------------
# discovery and --protocol


@pytest.mark.parametrize("spec, resolved, body", [
    ("asgimod", "asgimod:app", b"served by asgimod:app\n"),
    ("asgipkg", "asgipkg.main:app", b"served by asgipkg.main:app\n"),
])
def test_discovery_of_asgi_apps(serve, spec, resolved, body):
    s = serve(spec, app_dir=DISCOVERY)
    m = READY_RE.match(s.ready_line)
    assert m and m["spec"] == resolved and m["protocol"] == "asgi", s.ready_line
    r = s.get("/")
    assert r.status_code == 200 and r.content == body


def test_object_with_async_call_is_asgi(serve):
    s = serve("asgi_raw:app_object")
    m = READY_RE.match(s.ready_line)
    assert m and m["protocol"] == "asgi", s.ready_line
    assert s.get_json("/scope")["type"] == "http"


def test_sync_callable_returning_a_coroutine_is_wsgi_unless_told(serve):
    s = serve("asgi_raw:sync_call_object")
    m = READY_RE.match(s.ready_line)
    assert m and m["protocol"] == "wsgi", s.ready_line


def test_protocol_asgi_overrides_detection(serve):
    s = serve("asgi_raw:sync_call_object", args=("--protocol", "asgi"))
    m = READY_RE.match(s.ready_line)
    assert m and m["protocol"] == "asgi" and m["loop"] == "uvloop", s.ready_line
    scope = s.get_json("/scope")
    assert scope["type"] == "http" and scope["state"]["greeting"] == "hello from lifespan"


# --------------------------------------------------------------------------
# the buffered path (--blocking-threads N > 0; docs/asgi.md, "Two paths")


@pytest.fixture(scope="module")
def buffered_server(serve_module):
    return serve_module("asgi_raw:application", blocking_threads=2)


def test_buffered_banner(buffered_server):
    assert buffered_server.ready_line == (
        f"🔥 m0serve: asgi_raw:application on http://{HOST}:{buffered_server.port} "
        f"(protocol=asgi workers=1) blocking-threads=2")


def test_buffered_scope(buffered_server):
    resp = buffered_server.raw("GET", "/scope/a%20b?x=1", headers=[("X-Custom", "v"), ("X_Under", "u")])
    assert resp.status == 200, resp
    scope = json.loads(resp.body)
    assert scope["type"] == "http" and scope["method"] == "GET" and scope["http_version"] == "1.1"
    assert scope["path"] == "/scope/a b" and scope["raw_path"] == "/scope/a%20b"
    assert scope["query_string"] == "x=1"
    assert scope["client"][0] == "127.0.0.1"
    assert scope["state"]["greeting"] == "hello from lifespan"
    headers = [tuple(h) for h in scope["headers"]]
    assert ("x-custom", "v") in headers
    # Built from the WSGI environ: an underscore name is dropped, as for WSGI.
    assert not [h for h in headers if h[0] in ("x_under", "x-under")], headers


def test_buffered_scope_server_comes_from_the_environ(buffered_server):
    """docs/asgi.md: the buffered path builds its scope from the WSGI
    environ, so `server` is SERVER_NAME and SERVER_PORT, which come from the
    Host header (the executor gives the listening socket's address)."""
    resp = buffered_server.raw("GET", "/scope", headers=[("Host", "example.com:1234")])
    assert json.loads(resp.body)["server"] == ["example.com", 1234]


def test_buffered_body_arrives_whole(buffered_server):
    body = pattern(600_000)
    assert buffered_server.post("/chunks", data=body).json() == [[600_000, False]]
    assert buffered_server.post("/echo", data=body).content == body


def test_buffered_pathsend(buffered_server, tmp_path):
    """http.response.pathsend on the buffered path too: the scope offers it,
    and the file is the body (read whole, as every body on this path)."""
    data = pattern(300_000)
    f = tmp_path / "payload.bin"
    f.write_bytes(data)
    r = buffered_server.get(f"/pathsend?path={f}")
    assert r.status_code == 200 and r.headers["X-Sent-By"] == "pathsend", r.headers
    assert r.headers["Content-Length"] == str(len(data)) and r.content == data
    mark = buffered_server.mark()
    r = buffered_server.get(f"/pathsend?path={tmp_path / 'no-such-file'}")
    assert r.status_code == 500
    records = buffered_server.wait_for_record(r"asgi: application error", since=mark)
    assert len(records) == 1 and "FileNotFoundError" in records[0], records


def test_buffered_stream_is_sent_whole(buffered_server):
    resp = buffered_server.raw("GET", "/stream?n=3")
    assert resp.status == 200 and resp.complete, resp
    assert resp.header("Content-Length") == "24" and not resp.chunked, resp
    assert resp.body == b"chunk 0\nchunk 1\nchunk 2\n"


def test_buffered_requests_overlap_across_threads(buffered_server):
    key = uuid.uuid4().hex
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(requests.get, buffered_server.url(f"/barrier?key={key}&n=2"),
                               timeout=HTTP_TIMEOUT + 5) for _ in range(2)]
        results = [f.result() for f in futures]
    assert [(r.status_code, r.text) for r in results] == [(200, "released\n")] * 2


@pytest.mark.parametrize("kind", ["before-start", "mid-stream", "no-response"])
def test_buffered_error_is_500(buffered_server, kind):
    mark = buffered_server.mark()
    resp = buffered_server.raw("GET", f"/error/{kind}")
    assert resp.status == 500 and resp.complete and resp.body == b"Internal Server Error\n", resp
    lines = buffered_server.wait_for_stderr(r"application error", since=mark)
    assert len(lines) == 1 and f"path=/error/{kind}" in lines[0], lines
    assert buffered_server.get("/head").text == "hello world"


def test_buffered_error_log_line_says_asgi(buffered_server):
    mark = buffered_server.mark()
    buffered_server.raw("GET", "/error/before-start")
    lines = buffered_server.wait_for_stderr(r"application error", since=mark)
    assert len(lines) == 1 and "asgi: application error" in lines[0], lines
