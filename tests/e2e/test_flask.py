"""examples/flask_app, served through wsgiref.validate.validator."""

import time

import pytest

from conftest import RawReader, wait_until

STREAM_BODY = b"".join(b"line %d\n" % i for i in range(5))


def test_index_html(flask_server):
    r = flask_server.get("/")
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/html")
    assert "Hello from Flask" in r.text


def test_json(flask_server):
    r = flask_server.get("/json")
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("application/json")
    assert r.json() == {"hello": "world"}


@pytest.mark.parametrize("ctype, body", [
    ("text/plain; charset=utf-8", "héllo, echo\n".encode()),
    ("application/octet-stream", bytes(range(256)) * 64),
])
def test_echo(flask_server, ctype, body):
    r = flask_server.post("/echo", data=body, headers={"Content-Type": ctype})
    assert r.status_code == 200
    assert r.content == body
    assert r.headers["Content-Type"] == ctype


def test_stream_with_requests(flask_server):
    r = flask_server.get("/stream", stream=True)
    assert r.status_code == 200
    assert "Content-Length" not in r.headers
    assert b"".join(r.iter_content(chunk_size=None)) == STREAM_BODY


def test_stream_is_chunked_on_http11(flask_server):
    resp = flask_server.raw("GET", "/stream")
    assert resp.status == 200
    assert resp.header("Transfer-Encoding", "").lower() == "chunked", resp
    assert resp.header("Content-Length") is None
    assert resp.complete, f"chunked body did not end with the last chunk: {resp!r}"
    assert resp.body == STREAM_BODY


def test_stream_is_close_delimited_on_http10(flask_server):
    resp = flask_server.raw("GET", "/stream", version="HTTP/1.0")
    assert resp.status == 200
    assert resp.header("Content-Length") is None
    assert "chunked" not in resp.header("Transfer-Encoding", "").lower()
    assert resp.eof and not resp.timed_out, f"connection not closed after the body: {resp!r}"
    assert resp.body == STREAM_BODY


def test_stream_hears_its_client_leave(flask_server):
    """A streamed body whose generator waits for data, sending nothing, is
    closed within a second of its client leaving: GeneratorExit reaches the
    generator (its finally runs) and the thread is free again."""
    before = flask_server.get_json("/left").count("events")
    with flask_server.connect() as sock:
        sock.sendall(b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
        reader = RawReader(sock)
        assert reader.read_until(b"data: connected\n\n") is not None, reader.raw
    wait_until(lambda: flask_server.get_json("/left").count("events") == before + 1, 1.0,
               "the generator to be closed")
    assert "application error" not in flask_server.stderr


def test_form_get(flask_server):
    r = flask_server.get("/form")
    assert r.status_code == 200
    assert "<form" in r.text.lower()


def test_form_post(flask_server):
    r = flask_server.post("/form", data={"name": "Ada"})
    assert r.status_code == 200
    assert "Hello, Ada!" in r.text


def test_headers(flask_server):
    r = flask_server.get("/headers?a=1&b=two", headers={"X-Test-Header": "forty-two"})
    assert r.status_code == 200
    data = r.json()
    headers = {k.lower(): v for k, v in data.get("headers", data).items() if isinstance(v, str)}
    assert headers.get("x-test-header") == "forty-two"
    assert headers.get("host") == f"127.0.0.1:{flask_server.port}"
    assert data["remote_addr"] == "127.0.0.1"
    assert data["path"] == "/headers"
    query = data["query"]
    assert query in ("a=1&b=two", {"a": "1", "b": "two"}, {"a": ["1"], "b": ["two"]}), query


def test_boom_is_500_logged_once_and_server_survives(flask_server):
    mark = flask_server.mark()
    r = flask_server.get("/boom")
    assert r.status_code == 500
    flask_server.wait_for_stderr(r"RuntimeError: boom", since=mark)
    assert flask_server.get("/").status_code == 200
    time.sleep(0.3)  # bounded: let any duplicate log line land before counting
    lines = [l for l in flask_server.stderr_since(mark).splitlines() if "RuntimeError: boom" in l]
    assert len(lines) == 1, f"want exactly one line with the traceback text, got: {lines}"
