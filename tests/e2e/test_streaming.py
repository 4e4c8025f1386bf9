"""Streaming bodies: flushing, close(), disconnects, errors mid-stream."""

import time
import uuid

from conftest import RawReader, http_request, read_response, wait_until


def close_count(server, stream_id):
    return server.get_json(f"/closecount?id={stream_id}")["count"]


def test_first_chunk_arrives_before_the_generator_finishes(pep_server):
    n, delay = 5, 0.3  # the generator needs at least (n-1)*delay = 1.2 s
    with pep_server.connect() as sock:
        sent = time.monotonic()
        sock.sendall(http_request("GET", f"/stream?n={n}&delay={delay}&id={uuid.uuid4().hex}", pep_server.port))
        resp = read_response(RawReader(sock))
    assert resp.status == 200 and resp.complete, resp
    assert resp.body == b"".join(b"chunk %d\n" % i for i in range(n))
    first = resp.chunk_times[0] - sent
    last = resp.chunk_times[-1] - sent
    assert first < n * delay / 2, f"first chunk took {first:.2f}s: the body was buffered"
    # Causal check: the rest of the body was still being produced after the first chunk arrived.
    assert last - first >= (n - 2) * delay, f"first at {first:.2f}s, last at {last:.2f}s"


def test_close_called_after_a_complete_stream(pep_server):
    stream_id = uuid.uuid4().hex
    r = pep_server.get(f"/stream?n=3&id={stream_id}")
    assert r.status_code == 200 and r.content == b"chunk 0\nchunk 1\nchunk 2\n"
    assert wait_until(lambda: close_count(pep_server, stream_id) >= 1, 5, "close() on the body")
    assert close_count(pep_server, stream_id) == 1


def test_close_called_when_the_client_disconnects_mid_stream(pep_server):
    stream_id = uuid.uuid4().hex
    # 200 chunks 0.1 s apart: about 20 s if the server never notices the disconnect.
    with pep_server.connect() as sock:
        sock.sendall(http_request("GET", f"/stream?n=200&delay=0.1&id={stream_id}", pep_server.port))
        reader = RawReader(sock)
        assert reader.read_until(b"chunk 0\n") is not None, reader.raw
    # The client is gone; close() must run long before the generator would have ended.
    wait_until(lambda: close_count(pep_server, stream_id) >= 1, 8,
               "close() on the body after the client disconnected")
    assert close_count(pep_server, stream_id) == 1


def test_error_mid_stream_truncates_the_chunked_body(pep_server):
    resp = pep_server.raw("GET", "/stream-raise")
    assert resp.status == 200
    assert resp.chunked, resp
    assert resp.body.startswith(b"first chunk\n"), resp
    assert not resp.timed_out, f"connection left open after the app failed mid-stream: {resp!r}"
    assert resp.eof, resp
    assert not resp.complete, f"body ended with the terminating chunk, so the error is hidden: {resp!r}"
    assert not resp.raw.endswith(b"0\r\n\r\n")


def test_server_keeps_serving_after_stream_errors(pep_server):
    for _ in range(3):
        pep_server.raw("GET", "/stream-raise")
    assert pep_server.get("/ok").text == "ok\n"
