"""wsgi.input, the write() callable, exc_info and wsgi.file_wrapper."""

import io
import json

import pytest

BODY = b"first line\nsecond line\r\n\xff\xfe binary bytes\n\nlast line without newline"
LINES = io.BytesIO(BODY).readlines()  # what a file's readline()/readlines() give


def readline_pieces(data, size):
    """What a file object's readline(size), called until b"", returns."""
    f, pieces = io.BytesIO(data), []
    while piece := f.readline(size):
        pieces.append(piece)
    return pieces


def read_via(server, mode, n=None, body=BODY):
    query = f"/input?mode={mode}" + (f"&n={n}" if n is not None else "")
    r = server.post(query, data=body, headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 200, r.text[:2000]
    data = r.json()
    assert data["types"] in ([], ["bytes"]), data["types"]
    return [p.encode("latin-1") for p in data["pieces"]], data


@pytest.mark.parametrize("n", [1, 5, 7, 64, 65536])
def test_read_n(pep_server, n):
    pieces, data = read_via(pep_server, "read", n)
    assert b"".join(pieces) == BODY
    # read(n) never returns more than n bytes.
    assert all(len(p) <= n for p in pieces)
    assert data["content_length"] == str(len(BODY))


def test_readline(pep_server):
    pieces, _ = read_via(pep_server, "readline")
    assert pieces == LINES


def test_readline_with_size(pep_server):
    pieces, _ = read_via(pep_server, "readline", 4)
    assert pieces == readline_pieces(BODY, 4)


def test_readlines(pep_server):
    pieces, _ = read_via(pep_server, "readlines")
    assert pieces == LINES


def test_iteration(pep_server):
    pieces, _ = read_via(pep_server, "iter")
    assert pieces == LINES


def test_read_without_size_returns_everything(pep_server):
    pieces, _ = read_via(pep_server, "readall")
    assert pieces == [BODY]


def test_empty_body(pep_server):
    pieces, _ = read_via(pep_server, "read", 1024, body=b"")
    assert pieces == []


def test_large_body(pep_server):
    body = bytes(range(256)) * 4096  # 1 MiB
    pieces, _ = read_via(pep_server, "read", 65536, body=body)
    assert b"".join(pieces) == body


def test_chunked_request_body_arrives_whole(pep_server):
    parts = [b"part one\n", b"part two\n", b"x" * 10000, b"\nthe end\n"]
    # A generator body makes requests send Transfer-Encoding: chunked.
    r = pep_server.post("/input?mode=read&n=4096", data=iter(parts),
                        headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 200, r.text[:2000]
    data = r.json()
    assert b"".join(p.encode("latin-1") for p in data["pieces"]) == b"".join(parts)
    assert data["content_length"] in (None, "", str(sum(map(len, parts))))


def test_chunked_request_body_raw(pep_server):
    chunked = b"5\r\nhello\r\n7\r\n, world\r\n1\r\n\n\r\n0\r\n\r\n"
    resp = pep_server.raw("POST", "/input?mode=readlines", headers=[
        ("Transfer-Encoding", "chunked"), ("Content-Type", "text/plain")], body=chunked)
    assert resp.status == 200, resp
    assert json.loads(resp.body)["pieces"] == ["hello, world\n"]


def test_write_callable_output_precedes_iterable(pep_server):
    r = pep_server.get("/write")
    assert r.status_code == 200
    assert r.content == b"from write 1\nfrom write 2\nfrom iterable\n"


def test_write_callable_over_raw_http11(pep_server):
    resp = pep_server.raw("GET", "/write")
    assert resp.status == 200 and resp.complete, resp
    assert resp.body == b"from write 1\nfrom write 2\nfrom iterable\n"


def test_exc_info_before_headers_sent_gives_the_apps_500(pep_server):
    r = pep_server.get("/exc-info")
    assert r.status_code == 500
    assert r.content == b"the app's own error page\n"
    assert r.headers["Content-Type"] == "text/plain"
    assert "X-First-Call" not in r.headers


def test_file_wrapper(pep_server):
    r = pep_server.get("/filewrapper")
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "application/octet-stream"
    assert r.content == bytes(range(256)) * 400
