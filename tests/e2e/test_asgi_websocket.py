"""ASGI WebSocket: the handshake, messages both ways, close codes both ways,
errors, pings and the drain. Served by apps/asgi_raw.py; the client is the
`websockets` library (sync API), or a raw socket where the wire matters."""

import base64
import json
import os
import signal
import socket
import uuid

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from conftest import HOST, HTTP_TIMEOUT, RawReader, http_request, wait_until

# Every test here serves an ASGI application: a free-threaded build refuses it.
pytestmark = pytest.mark.gil

STOP_WITHIN = 10  # seconds; the drain is bounded at 5


@pytest.fixture(scope="module")
def server(serve_module):
    return serve_module("asgi_raw:application")


def ws_url(server, path):
    return f"ws://{HOST}:{server.port}{path}"


def ws(server, path, **kwargs):
    kwargs.setdefault("open_timeout", HTTP_TIMEOUT)
    kwargs.setdefault("close_timeout", HTTP_TIMEOUT)
    return connect(ws_url(server, path), **kwargs)


def events(server, key):
    return server.get_json(f"/events?id={key}")


def upgrade_headers(extra=()):
    key = base64.b64encode(os.urandom(16)).decode()
    return [("Upgrade", "websocket"), ("Connection", "Upgrade"),
            ("Sec-WebSocket-Key", key), ("Sec-WebSocket-Version", "13"), *extra]


def closed_by_server(conn):
    """Reads until the server closes; returns (messages, close frame)."""
    messages = []
    with pytest.raises(ConnectionClosed) as info:
        while True:
            messages.append(conn.recv(timeout=HTTP_TIMEOUT))
    return messages, info.value.rcvd


# --------------------------------------------------------------------------
# the handshake and messages


def test_echo_text_and_bytes_with_subprotocol_and_headers(server):
    with ws(server, "/ws/echo", subprotocols=["chat", "superchat"]) as conn:
        assert conn.subprotocol == "chat"
        assert conn.response.status_code == 101
        assert conn.response.headers["X-WS"] == "yes"
        conn.send("hello")
        assert conn.recv(timeout=HTTP_TIMEOUT) == "hello"
        conn.send("héllo wörld ☃")
        assert conn.recv(timeout=HTTP_TIMEOUT) == "héllo wörld ☃"
        conn.send(b"\x00\x01\x02\xff")
        got = conn.recv(timeout=HTTP_TIMEOUT)
        assert isinstance(got, bytes) and got == b"\x00\x01\x02\xff"
        conn.send(b"")
        assert conn.recv(timeout=HTTP_TIMEOUT) == b""
        conn.send("")
        assert conn.recv(timeout=HTTP_TIMEOUT) == ""


def test_no_subprotocol_offered_none_chosen(server):
    with ws(server, "/ws/echo") as conn:
        assert conn.subprotocol is None
        assert "Sec-WebSocket-Protocol" not in conn.response.headers


def test_websocket_scope(server):
    with ws(server, "/ws/scope?a=1&b=%20", subprotocols=["chat", "superchat"],
            additional_headers={"X-Custom": "custom"}) as conn:
        scope = json.loads(conn.recv(timeout=HTTP_TIMEOUT))
        assert conn.subprotocol is None  # offered, and the app chose none
    assert scope["type"] == "websocket"
    assert scope["asgi"] == {"version": "3.0", "spec_version": "2.5"}
    assert scope["http_version"] == "1.1"
    assert scope["scheme"] == "ws"
    assert scope["path"] == "/ws/scope"
    assert scope["raw_path"] == "/ws/scope"
    assert scope["query_string"] == "a=1&b=%20"
    assert scope["root_path"] == ""
    assert scope["subprotocols"] == ["chat", "superchat"]
    assert scope["client"][0] == "127.0.0.1"
    assert scope["server"] == [HOST, server.port]
    assert scope["state"]["greeting"] == "hello from lifespan"
    headers = [tuple(h) for h in scope["headers"]]
    assert ("x-custom", "custom") in headers
    assert ("sec-websocket-version", "13") in headers
    assert ("upgrade", "websocket") in headers
    assert ("sec-websocket-protocol", "chat, superchat") in headers
    assert all(name == name.lower() for name, _ in headers), headers
    assert scope["_types"]["raw_path"] == "bytes" and scope["_types"]["header_parts"] == ["bytes"]


@pytest.mark.parametrize("size", [70_000, 1_000_000])
def test_big_messages(server, size):
    text = "".join(chr(0x41 + i % 26) for i in range(size))
    data = bytes(i % 251 for i in range(size))
    with ws(server, "/ws/echo", max_size=None) as conn:
        conn.send(text)
        assert conn.recv(timeout=HTTP_TIMEOUT) == text
        conn.send(data)
        assert conn.recv(timeout=HTTP_TIMEOUT) == data


@pytest.mark.parametrize("delay", [0, 0.002], ids=["fast-app", "slow-app"])
def test_many_messages_keep_their_order(server, delay):
    """500 messages sent before any is read; with a slow app, more wait
    than the 16 frames the server queues for it, and Go stops reading."""
    n = 500
    with ws(server, f"/ws/echo?delay={delay}") as conn:
        for i in range(n):  # all sent before any is read: flow control must not lose or reorder
            conn.send(f"message {i}" if i % 2 else f"message {i}".encode())
        got = [conn.recv(timeout=HTTP_TIMEOUT) for _ in range(n)]
    assert got == [f"message {i}" if i % 2 else f"message {i}".encode() for i in range(n)]


def test_fragmented_message_arrives_whole(server):
    with ws(server, "/ws/echo") as conn:
        conn.send(["frag", "mented ", "text"])  # one message in three frames
        assert conn.recv(timeout=HTTP_TIMEOUT) == "fragmented text"
        conn.send([b"\x00", b"\x01\x02"])
        assert conn.recv(timeout=HTTP_TIMEOUT) == b"\x00\x01\x02"


def test_send_to_a_client_that_does_not_read_waits(server):
    key = uuid.uuid4().hex
    with server.connect() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(http_request("GET", f"/ws/flood?n=1000&id={key}", server.port, headers=upgrade_headers()))
        reader = RawReader(sock)
        head = reader.read_until(b"\r\n\r\n")
        assert head is not None and head.startswith(b"HTTP/1.1 101 "), reader.raw
        # Read nothing more: 64 MB cannot all be sent; the app's send must wait.
        with pytest.raises(AssertionError):
            wait_until(lambda: events(server, key), 2, "the app to send 64 MB to a client that reads nothing")
    assert "sent all" not in events(server, key)


def test_two_connections_are_independent(server):
    with ws(server, "/ws/echo") as a, ws(server, "/ws/echo") as b:
        a.send("to a")
        b.send("to b")
        assert b.recv(timeout=HTTP_TIMEOUT) == "to b"
        assert a.recv(timeout=HTTP_TIMEOUT) == "to a"


def test_ping_is_answered(server):
    with ws(server, "/ws/echo") as conn:
        pong = conn.ping(b"are you there")
        assert pong.wait(HTTP_TIMEOUT)
        conn.send("still echoing")
        assert conn.recv(timeout=HTTP_TIMEOUT) == "still echoing"


# --------------------------------------------------------------------------
# closing


@pytest.mark.parametrize("code, reason", [(1000, ""), (1001, "going"), (4321, "client says bye")])
def test_client_close_code_reaches_the_app(server, code, reason):
    key = uuid.uuid4().hex
    with ws(server, f"/ws/echo?id={key}") as conn:
        conn.send("hi")
        assert conn.recv(timeout=HTTP_TIMEOUT) == "hi"
        conn.close(code=code, reason=reason)
    assert wait_until(lambda: events(server, key), 5, "websocket.disconnect in the app") == [
        {"code": code, "reason": reason}]


def vanish(server):
    """A WebSocket whose TCP connection ends without a close frame; the
    app's websocket.disconnect, as recorded."""
    key = uuid.uuid4().hex
    with server.connect() as sock:
        sock.sendall(http_request("GET", f"/ws/echo?id={key}", server.port, headers=upgrade_headers()))
        reader = RawReader(sock)
        head = reader.read_until(b"\r\n\r\n")
        assert head is not None and head.startswith(b"HTTP/1.1 101 "), reader.raw
    return wait_until(lambda: events(server, key), 5, "websocket.disconnect in the app")


def test_client_vanishing_is_1006_in_the_app(server):
    recorded = vanish(server)
    assert [r["code"] for r in recorded] == [1006], recorded


def test_client_vanishing_has_no_reason(server):
    assert vanish(server) == [{"code": 1006, "reason": ""}]


def test_client_close_without_a_code_is_1005_in_the_app(server):
    """A close frame with no status code: the app hears 1005."""
    key = uuid.uuid4().hex
    with server.connect() as sock:
        sock.sendall(http_request("GET", f"/ws/echo?id={key}", server.port, headers=upgrade_headers()))
        reader = RawReader(sock)
        head = reader.read_until(b"\r\n\r\n")
        assert head is not None and head.startswith(b"HTTP/1.1 101 "), reader.raw
        sock.sendall(b"\x88\x80" + os.urandom(4))  # FIN + close, masked, empty payload
        reply = reader.read_exact(2)
        assert reply[:1] == b"\x88", reader.raw  # the server's close frame
    assert wait_until(lambda: events(server, key), 5, "websocket.disconnect in the app") == [
        {"code": 1005, "reason": ""}]


@pytest.mark.parametrize("code, reason", [(1000, "done"), (4002, "app says bye"), (1008, "")])
def test_app_close_code_reaches_the_client(server, code, reason):
    with ws(server, "/ws/echo") as conn:
        conn.send(f"close {code} {reason}")
        messages, frame = closed_by_server(conn)
    assert messages == []
    assert frame is not None and (frame.code, frame.reason) == (code, reason)


def test_app_returning_after_accept_closes_1000(server):
    with ws(server, "/ws/return") as conn:
        messages, frame = closed_by_server(conn)
    assert messages == ["bye"]
    assert frame is not None and frame.code == 1000


def test_send_after_the_client_left_raises_oserror(server):
    """ASGI: a send on a closed connection raises a subclass of OSError."""
    key = uuid.uuid4().hex
    with ws(server, f"/ws/send-after-disconnect?id={key}"):
        pass
    assert wait_until(lambda: events(server, key), 5, "the app's send after the disconnect") == [
        {"raised": "OSError", "oserror": True}]


@pytest.fixture(scope="module")
def small_server(serve_module):
    return serve_module("asgi_raw:application", args=("--max-body", "64k"))


def test_message_at_max_body_is_delivered(small_server):
    with ws(small_server, "/ws/echo", max_size=None) as conn:
        conn.send(b"x" * 65536)
        assert conn.recv(timeout=HTTP_TIMEOUT) == b"x" * 65536


def test_message_over_max_body_closes_1009(small_server):
    with ws(small_server, "/ws/echo", max_size=None) as conn:
        conn.send(b"x" * 65537)
        messages, frame = closed_by_server(conn)
    assert messages == []
    assert frame is not None and frame.code == 1009, frame


def test_message_over_max_body_app_hears_1009(small_server):
    key = uuid.uuid4().hex
    with ws(small_server, f"/ws/echo?id={key}", max_size=None) as conn:
        conn.send(b"x" * 65537)
        closed_by_server(conn)
    assert wait_until(lambda: events(small_server, key), 5, "websocket.disconnect in the app") == [
        {"code": 1009, "reason": ""}]


@pytest.mark.parametrize("path", ["/ws/deny", "/ws/no-such-route"])
def test_close_before_accept_is_403(server, path):
    resp = server.raw("GET", path, headers=upgrade_headers())
    assert resp.status == 403, resp
    assert resp.header("Upgrade") is None and resp.header("Sec-WebSocket-Accept") is None, resp
    with pytest.raises(InvalidStatus) as info:
        ws(server, path)
    assert info.value.response.status_code == 403


def test_bad_handshake_is_400(server):
    headers = [h for h in upgrade_headers() if h[0] != "Sec-WebSocket-Key"]
    resp = server.raw("GET", "/ws/echo", headers=headers)
    assert resp.status == 400, resp


# --------------------------------------------------------------------------
# errors


def test_raise_before_accept_is_500_and_logged(server):
    mark = server.mark()
    with pytest.raises(InvalidStatus) as info:
        ws(server, "/ws/raise-before")
    assert info.value.response.status_code == 500
    records = server.wait_for_record(r"asgi: application error", since=mark)
    assert len(records) == 1, records
    line, traceback = records[0].split("\n", 1)
    assert 'error="RuntimeError: ws boom before accept"' in line and "path=/ws/raise-before" in line, line
    assert traceback.startswith("Traceback") and traceback.endswith("RuntimeError: ws boom before accept"), traceback


def test_raise_after_accept_closes_1011_and_is_logged(server):
    mark = server.mark()
    with ws(server, "/ws/raise-after") as conn:
        messages, frame = closed_by_server(conn)
    assert messages == []
    assert frame is not None and frame.code == 1011
    records = server.wait_for_record(r"asgi: application error", since=mark)
    assert len(records) == 1, records
    line, traceback = records[0].split("\n", 1)
    assert 'error="RuntimeError: ws boom after accept"' in line and "path=/ws/raise-after" in line, line
    assert traceback.startswith("Traceback") and traceback.endswith("RuntimeError: ws boom after accept"), traceback


def test_http_still_served_after_websocket_errors(server):
    for _ in range(3):
        with pytest.raises(InvalidStatus):
            ws(server, "/ws/raise-before")
        with ws(server, "/ws/raise-after") as conn:
            closed_by_server(conn)
    assert server.get("/head").text == "hello world"
    with ws(server, "/ws/echo") as conn:
        conn.send("alive")
        assert conn.recv(timeout=HTTP_TIMEOUT) == "alive"


# --------------------------------------------------------------------------
# the drain


def test_sigterm_closes_open_websockets_with_1001(serve, tmp_path):
    """The client gets a close frame with 1001, the app hears
    websocket.disconnect with 1001, and the server exits 0."""
    events_dir = tmp_path / "events"
    events_dir.mkdir()
    s = serve("asgi_raw:application", env={"M0_TEST_EVENTS_DIR": str(events_dir)})
    key = uuid.uuid4().hex
    with ws(s, f"/ws/hold?id={key}") as conn:
        assert conn.recv(timeout=HTTP_TIMEOUT) == "holding"
        s.send_signal(signal.SIGTERM)
        messages, frame = closed_by_server(conn)
    rc = s.wait_exit(STOP_WITHIN)
    assert rc == 0, s.describe()
    assert messages == []
    assert frame is not None and frame.code == 1001, frame
    recorded = [json.loads(line) for line in (events_dir / key).read_text().splitlines()]
    assert recorded == [{"type": "websocket.disconnect", "code": 1001}]


def test_sigterm_close_frame_is_1001_for_every_websocket(serve):
    """docs/asgi.md: on SIGTERM every open WebSocket gets a close frame with
    1001, also when the app returns as soon as it hears of the drain (200
    of them, so a race between the two would show)."""
    n = 200
    s = serve("asgi_raw:application")
    conns = []
    try:
        for i in range(n):
            conns.append(ws(s, f"/ws/hold?id=drain-{i}"))
        for conn in conns:
            assert conn.recv(timeout=HTTP_TIMEOUT) == "holding"
        s.send_signal(signal.SIGTERM)
        codes = {}
        for conn in conns:
            _, frame = closed_by_server(conn)
            code = frame.code if frame is not None else None
            codes[code] = codes.get(code, 0) + 1
    finally:
        for conn in conns:
            conn.close()
    assert s.wait_exit(STOP_WITHIN) == 0, s.describe()
    assert codes == {1001: n}


def test_sigterm_lets_a_channels_consumer_finish_its_disconnect(serve, tmp_path):
    """Django Channels: on SIGTERM the client gets 1001 and the consumer's
    disconnect() (group_discard, then more after an await) runs to its end
    before the loop stops, as under uvicorn."""
    marks = tmp_path / "marks"
    marks.write_text("")
    s = serve("channels_chat:application", env={"M0_TEST_MARKS": str(marks)})
    with ws(s, "/ws/chat/") as a, ws(s, "/ws/chat/") as b:
        a.send("hello, room")
        assert b.recv(timeout=HTTP_TIMEOUT) == "hello, room"  # the channel layer works
        assert a.recv(timeout=HTTP_TIMEOUT) == "hello, room"
        s.send_signal(signal.SIGTERM)
        _, fa = closed_by_server(a)
        _, fb = closed_by_server(b)
    assert s.wait_exit(STOP_WITHIN) == 0, s.describe()
    assert fa is not None and fa.code == 1001 and fb is not None and fb.code == 1001, (fa, fb)
    assert sorted(marks.read_text().splitlines()) == ["disconnect 1001", "disconnect 1001"], s.describe()
