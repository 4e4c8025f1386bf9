"""m0serve --realtime end to end: holds approved by real Flask and Django
views, frames published from views and commands, replay and gaps across
reconnects and restarts, heartbeats, keepalive, the drain, the refusals.

Clients: a raw SSE reader on a socket (it sees comments, ids and retry
fields as sent), the websockets client, requests."""

import base64
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as ws_connect

from conftest import (APPS, EXAMPLES, FRONT_ENDS, HTTP_TIMEOUT, ROOT, RawReader, http_request, serve_on,
                      wait_until)

# --------------------------------------------------------------------------
# a raw SSE client


class SSE:
    """One held SSE stream read off its socket: the head, then events,
    comments and retry fields as the server framed them."""

    def __init__(self, server, path, last_id=None, headers=(), version="HTTP/1.1", timeout=HTTP_TIMEOUT):
        self.sock = server.connect(timeout=timeout)
        hdrs = [("Accept", "text/event-stream"), *headers]
        if last_id is not None:
            hdrs.append(("Last-Event-ID", last_id))
        self.sock.sendall(http_request("GET", path, server.port, hdrs, version=version))
        self.reader = RawReader(self.sock, timeout)
        head = self.reader.read_until(b"\r\n\r\n")
        assert head is not None, f"no head: {self.reader.raw!r}"
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split(" ")[1])
        self.headers = {}
        for line in lines[1:]:
            if line:
                k, _, v = line.partition(":")
                self.headers[k.strip().lower()] = v.strip()
        self.chunked = "chunked" in self.headers.get("transfer-encoding", "")
        self.text = b""
        self.positions = []  # the ids of m0-position events: where the stream stands
        self.ended = False  # a clean end: the last chunk, or the close of an HTTP/1.0 stream

    def _more(self):
        if self.chunked:
            size_line = self.reader.read_until(b"\r\n")
            if size_line is None:
                return False
            size = int(size_line.strip(), 16)
            if size == 0:
                self.ended = self.reader.read_until(b"\r\n") == b"\r\n"
                return False
            data = self.reader.read_exact(size + 2)
            self.text += data[:size]
            return len(data) == size + 2
        if not self.reader._fill():
            self.ended = self.reader.eof and not self.reader.timed_out and not self.reader.reset
            return False
        self.text += self.reader.buf
        self.reader.buf = b""
        return True

    def _block(self, timeout):
        """The next block as sent, or None at the end or after timeout; an
        id alone (a position) is noted in positions."""
        self.reader.deadline = time.monotonic() + timeout
        while b"\n\n" not in self.text:
            if not self._more():
                return None
        block, self.text = self.text.split(b"\n\n", 1)
        parsed = self._parse(block)
        if parsed.get("event") == "m0-position":
            assert parsed["data"] == b"" and parsed.get("id"), parsed
            self.positions.append(parsed["id"])
        return parsed

    def next(self, timeout=HTTP_TIMEOUT):
        """The next block (event, comment or retry) as a dict, or None at the
        end of the stream or after timeout. Position events are noted in
        positions, and not returned."""
        while True:
            block = self._block(timeout)
            if block is None or block.get("event") != "m0-position":
                return block

    def position(self, timeout=HTTP_TIMEOUT):
        """Where a new stream begins: the id of the position event it sends first."""
        block = self._block(timeout)
        assert block is not None and block.get("event") == "m0-position", \
            f"no position first: {self.reader.raw[-2000:]!r}"
        return block["id"]

    @staticmethod
    def _parse(block):
        out = {"data": None}
        data = []
        for line in block.split(b"\n"):
            name, _, value = line.partition(b":")
            value = value[1:] if value.startswith(b" ") else value
            if name == b"":
                out["comment"] = value
            elif name == b"data":
                data.append(value)
            else:
                out[name.decode()] = value.decode("utf-8", "replace")
        if data:
            out["data"] = b"\n".join(data)
        return out

    def event(self, timeout=HTTP_TIMEOUT):
        """The next event, skipping comments; fails at the end or timeout."""
        while True:
            b = self.next(timeout)
            assert b is not None, f"the stream ended or went quiet: {self.reader.raw[-2000:]!r}"
            if "comment" not in b:
                return b

    def close(self):
        self.sock.close()


# --------------------------------------------------------------------------
# the example applications


class Room:
    """A served realtime example: how to publish, announce and hold."""

    def __init__(self, server, kind):
        self.server, self.kind = server, kind
        self.session = __import__("requests").Session()
        self.csrf = {}
        if kind == "django":
            r = self.session.get(server.url("/"), timeout=HTTP_TIMEOUT)
            assert r.status_code == 200 and "EventSource" in r.text
            self.csrf = {"X-CSRFToken": self.session.cookies["csrftoken"]}

    def publish(self, text):
        r = self.session.post(self.server.url("/publish"), data={"text": text}, headers=self.csrf,
                              timeout=HTTP_TIMEOUT)
        assert r.status_code == 200, r.text
        return r.json()["id"]

    def announce(self, text):
        r = self.session.post(self.server.url("/announce"), data={"text": text}, headers=self.csrf,
                              timeout=HTTP_TIMEOUT)
        assert r.status_code == 200, r.text
        return r.json()["output"]


EXAMPLE_APPS = {
    "flask": ("app:app", EXAMPLES / "flask_realtime"),
    "django": ("realtime_site.wsgi", EXAMPLES / "django_realtime"),
}


def start_room(serve, kind, args=(), env=None):
    spec, app_dir = EXAMPLE_APPS[kind]
    server = serve(spec, app_dir=app_dir, args=("--realtime", *args), env=env)
    return Room(server, kind)


def held(server, kind):
    """The connections held now, from the metrics exposition."""
    text = server.get("/__metrics").text
    m = re.search(r'^m0_realtime_held\{kind="%s"\} (\d+)' % kind, text, re.M)
    return int(m.group(1)) if m else None


@pytest.mark.parametrize("kind", ["flask", "django"])
def test_stream_and_socket_meet(serve, kind):
    room = start_room(serve, kind, args=("--metrics",))
    s = SSE(room.server, "/events")
    assert s.status == 200
    assert s.headers["content-type"] == "text/event-stream"
    assert s.headers["cache-control"] == "no-cache" and s.headers["x-accel-buffering"] == "no"
    assert s.chunked and not any(k.startswith("m0-") for k in s.headers)
    with ws_connect(room.server.url("/ws").replace("http", "ws", 1), open_timeout=HTTP_TIMEOUT) as ws:
        wait_until(lambda: held(room.server, "websocket") == 1 and held(room.server, "sse") == 1, 10, "both holds")
        ws.send("hello from a socket")
        said = ws.recv(timeout=HTTP_TIMEOUT)
        assert re.fullmatch(r"\d+: hello from a socket", said), said
        e = s.event()
        assert e["data"].decode() == said and e["id"]
        # A view publishes: both hear it, with the id it returned.
        fid = room.publish("from a view")
        assert ws.recv(timeout=HTTP_TIMEOUT) == "from a view"
        assert s.event() == {"data": b"from a view", "id": fid}
        # The management command, run in the server, publishes too.
        out = room.announce("tea is ready")
        assert ws.recv(timeout=HTTP_TIMEOUT) == "announcement: tea is ready"
        assert s.event() == {"data": b"announcement: tea is ready", "id": out}
    s.close()
    wait_until(lambda: held(room.server, "websocket") == 0 and held(room.server, "sse") == 0, 10, "the holds to end")
    metrics = room.server.get("/__metrics").text
    assert re.search(r"^m0_realtime_frames_published_total 3$", metrics, re.M), metrics


@pytest.mark.parametrize("kind", ["flask", "django"])
def test_command_outside_the_server_says_why(kind):
    spec, app_dir = EXAMPLE_APPS[kind]
    if kind == "django":
        argv = [sys.executable, "manage.py", "announce", "hello"]
    else:
        argv = [sys.executable, "-m", "flask", "--app", "app", "announce", "hello"]
    p = subprocess.run(argv, cwd=app_dir, capture_output=True, text=True, timeout=60)
    assert p.returncode == 1
    assert "m0pub.publish sent nothing" in p.stderr and "--realtime" in p.stderr, p.stderr
    assert "the announcement was not published" in p.stderr, p.stderr


def test_reconnect_gets_what_it_missed(serve):
    room = start_room(serve, "flask")
    s = SSE(room.server, "/events")
    ids = [room.publish(f"before {i}") for i in range(3)]
    for i, fid in enumerate(ids):
        assert s.event() == {"data": f"before {i}".encode(), "id": fid}
    s.close()
    missed = [room.publish(f"while away {i}") for i in range(2)]
    again = SSE(room.server, "/events", last_id=ids[-1])
    for i, fid in enumerate(missed):
        assert again.event() == {"data": f"while away {i}".encode(), "id": fid}
    live = room.publish("live")
    assert again.event() == {"data": b"live", "id": live}
    # Up to date: nothing replayed, no gap, then live.
    up = SSE(room.server, "/events", last_id=live)
    nxt = room.publish("next")
    assert up.event() == {"data": b"next", "id": nxt}
    assert len(s.positions) == 1 and again.positions == [] and up.positions == []


def test_cut_before_the_first_frame(serve):
    """A new stream says where it begins (an id without an event), so a
    client cut before any frame reached it comes back for what it missed."""
    room = start_room(serve, "flask")
    known = room.publish("before the stream")
    s = SSE(room.server, "/events")
    assert s.position() == known
    s.close()
    missed = room.publish("while away")
    again = SSE(room.server, "/events", last_id=s.positions[-1])
    assert again.event() == {"data": b"while away", "id": missed}


def test_restart_sends_the_gap(serve):
    room = start_room(serve, "flask")
    s = SSE(room.server, "/events")
    old = room.publish("before the restart")
    assert s.event()["id"] == old
    s.close()
    room.server.stop()
    room = start_room(serve, "flask")
    room.publish("first of the new run")  # its sequence number may equal the old one's
    s = SSE(room.server, "/events", last_id=old)
    e = s.event()
    assert e.get("event") == "m0-gap" and "id" not in e, e
    gap = json.loads(e["data"])
    assert gap["last_event_id"] == old
    assert gap["newest_id"] != old and gap["newest_id"].endswith("-1"), gap
    fid = room.publish("after")
    assert s.event() == {"data": b"after", "id": fid}
    # Past the gap the client stood at the newest id: had it reconnected
    # then, it would not have been sent the same gap again.
    assert s.positions == [gap["newest_id"]], s.positions


@pytest.mark.parametrize("presented", ["not-an-id", "1-1", "FUTURE"])
def test_gap_for_ids_not_in_the_journal(serve, presented):
    room = start_room(serve, "flask", args=("--replay-frames", "2"))
    ids = [room.publish(f"f{i}") for i in range(5)]
    if presented == "FUTURE":
        epoch, seq = ids[-1].split("-")
        presented = f"{epoch}-{int(seq) + 10}"
    for last in (presented, ids[0]):  # beyond a journal of 2, too
        s = SSE(room.server, "/events", last_id=last)
        e = s.event()
        assert e.get("event") == "m0-gap", e
        assert json.loads(e["data"]) == {"last_event_id": last, "newest_id": ids[-1]}
        s.close()
    s = SSE(room.server, "/events", last_id=ids[2])  # inside the journal
    assert [s.event()["id"] for _ in range(2)] == ids[3:]


def test_frames_of_any_bytes(serve):
    server = serve("realtime_app:application", args=("--realtime",))
    s = SSE(server, "/hold?c=bytes")
    assert s.headers.get("x-from-view") == "yes"
    for body, want in [
        (b"one\ntwo\r\nthree\rfour", b"one\ntwo\nthree\nfour"),  # line ends become data lines
        (b"", b""),
        (b"caf\xc3\xa9", b"caf\xc3\xa9"),
        (b"\xff\xfe raw", b"\xff\xfe raw"),  # not UTF-8: sent as it is
    ]:
        r = server.post("/publish?c=bytes", data=body)
        fid = r.json()["id"]
        assert s.event() == {"data": want, "id": fid}
    big = server.post("/publish?c=bytes", data=b"x" * (64 * 1024 + 1)).json()
    assert big == {"id": False}
    assert server.post("/publish?c=%01reserved", data=b"x").json() == {"id": False}


@pytest.mark.parametrize("workers", [None, "2"])
def test_an_event_type_reaches_the_stream_and_its_replay(serve, workers):
    """m0pub.publish(channel, data, event=...): an SSE event line on the
    stream, on every worker's, and in the replay; the data alone on a
    WebSocket; an event the server would not send refused."""
    args = ("--realtime",) + (("--workers", workers) if workers else ())
    server = serve("realtime_app:application", args=args)
    streams = [SSE(server, "/hold?c=ev") for _ in range(4)]  # the least-loaded handoff puts some on each worker
    ws = ws_connect(f"ws://127.0.0.1:{server.port}/ws?c=ev", open_timeout=HTTP_TIMEOUT)
    fid = server.post("/publish?c=ev&event=tick", data=b"one\ntwo").json()["id"]
    plain = server.post("/publish?c=ev", data=b"three").json()["id"]
    for s in streams:
        assert s.event() == {"event": "tick", "data": b"one\ntwo", "id": fid}
        assert s.event() == {"data": b"three", "id": plain}
    assert ws.recv(timeout=HTTP_TIMEOUT) == "one\ntwo"
    ws.close()
    again = SSE(server, "/hold?c=ev", last_id=streams[0].positions[-1])
    assert again.event() == {"event": "tick", "data": b"one\ntwo", "id": fid}
    for bad in ("m0-gap", "a%0Ab", "x" * 256):
        assert server.post(f"/publish?c=ev&event={bad}", data=b"x").json() == {"id": False}


def test_a_worker_that_starts_late_replays_what_came_before(serve, tmp_path):
    """A worker that starts after its sibling began to serve warms its
    journal from the sibling's: a stream that resumes there from before the
    frames published meanwhile is replayed them, not sent m0-gap."""
    server = serve("realtime_gated:application", args=("--realtime", "--workers", "2"),
                   env={"M0_TEST_GATE": str(tmp_path)})
    assert server.stdout.count("🔥 m0serve:") == 1  # the second waits at the gate
    first = server.post("/publish?c=late", data=b"one").json()["id"]
    second = server.post("/publish?c=late", data=b"two").json()["id"]
    (tmp_path / "open").touch()
    wait_until(lambda: server.stdout.count("🔥 m0serve:") == 2, 30, lambda: f"2 banners\n{server.describe()}")
    # Resumed from before both: the least-loaded handoff puts at least one
    # of four on the worker that started late.
    before = first.rsplit("-", 1)[0] + "-0"
    streams = [SSE(server, "/hold?c=late", last_id=before) for _ in range(4)]
    for s in streams:
        assert s.event() == {"data": b"one", "id": first}
        assert s.event() == {"data": b"two", "id": second}
    assert not [r for r in server.records() if "found no sibling's journal" in r]


def test_socket_messages_reach_the_application(serve):
    server = serve("realtime_app:application", args=("--realtime",))
    url = server.url("/ws?c=sock").replace("http", "ws", 1)
    with ws_connect(url, additional_headers={"Cookie": "sessionid=s1", "M0-Channel": "forged"},
                    open_timeout=HTTP_TIMEOUT) as ws:
        ws.send("text")
        ws.send(b"\x00\x01")
        posts = wait_until(lambda: [p for p in server.get_json("/posts") if p["channel"] == "sock"][-2:]
                           if len(server.get_json("/posts")) >= 2 else None, 10, "two posts")
        assert [(p["opcode"], p["type"], p["body"], p["cookie"]) for p in posts] == [
            ("1", "text/plain; charset=utf-8", "text", "sessionid=s1"),
            ("2", "application/octet-stream", "\x00\x01", "sessionid=s1"),
        ]
        assert posts[0]["slot"] and posts[0]["slot"] == posts[1]["slot"]
        server.post("/publish?c=sock", data=b"\xff binary")
        assert ws.recv(timeout=HTTP_TIMEOUT) == b"\xff binary"
        server.post("/publish?c=sock", data="text \u2713".encode())
        assert ws.recv(timeout=HTTP_TIMEOUT) == "text \u2713"


def client_frame(opcode, payload, fin=True):
    """A client's WebSocket frame, masked with a key of zeros (the payload
    as it is)."""
    assert len(payload) < 126
    return bytes([(0x80 if fin else 0) | opcode, 0x80 | len(payload)]) + b"\0\0\0\0" + payload


def open_held_socket(server, channel):
    """A held WebSocket on a raw socket: (socket, reader), after the 101."""
    sock = server.connect()
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(http_request("GET", f"/ws?c={channel}", server.port, headers=[
        ("Upgrade", "websocket"), ("Connection", "Upgrade"),
        ("Sec-WebSocket-Key", key), ("Sec-WebSocket-Version", "13")]))
    reader = RawReader(sock)
    head = reader.read_until(b"\r\n\r\n")
    assert head is not None and head.startswith(b"HTTP/1.1 101 "), reader.raw
    return sock, reader


def posts_of(server, channel):
    return [p for p in server.get_json("/posts") if p["channel"] == channel]


@pytest.mark.parametrize("front_end", FRONT_ENDS)
@pytest.mark.parametrize("frames", [
    [client_frame(1, b"caf\xe9")],
    [client_frame(1, b"ok \xc3", fin=False), client_frame(0, b"(")],  # not UTF-8 once assembled
], ids=["one-frame", "fragments"])
def test_held_socket_fails_a_text_message_not_utf8(serve, front_end, frames):
    """RFC 6455 8.1: a text message that is not UTF-8 fails the connection
    with 1007, and nothing of it is posted to the application."""
    server = serve_on(serve, front_end, "realtime_app:application", args=("--realtime",))
    channel = f"utf8-{front_end}"
    sock, reader = open_held_socket(server, channel)
    with sock:
        sock.sendall(b"".join(frames))
        head = reader.read_exact(2)
        assert head is not None and head[0] == 0x88, reader.raw  # FIN + close
        payload = reader.read_exact(head[1] & 0x7F)
        assert payload is not None and int.from_bytes(payload[:2], "big") == 1007, reader.raw
        sock.sendall(client_frame(8, payload[:2]))  # the close reply
        assert reader.at_eof(wait=5), reader.raw
    time.sleep(0.2)
    assert posts_of(server, channel) == []


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_held_socket_takes_utf8_split_across_fragments(serve, front_end):
    """A UTF-8 sequence split between the frames of one message is valid:
    the message is posted whole."""
    server = serve_on(serve, front_end, "realtime_app:application", args=("--realtime",))
    channel = f"split-{front_end}"
    sock, _ = open_held_socket(server, channel)
    with sock:
        sock.sendall(client_frame(1, b"caf\xc3", fin=False) + client_frame(0, b"\xa9"))
        posts = wait_until(lambda: posts_of(server, channel), 10, "the post")
    assert [(p["opcode"], p["body"].encode("latin-1")) for p in posts] == [("1", "caf\u00e9".encode())]


def test_m0_headers_never_reach_the_application(serve):
    server = serve("realtime_app:application", args=("--realtime",))
    r = server.get("/echo-m0", headers={"M0-Hold": "stream", "M0-Channel": "x", "m0-slot": "1", "X-Other": "y"})
    assert r.json() == []


def test_a_wrong_hold_is_a_500_and_one_line(serve):
    server = serve("realtime_app:application", args=("--realtime",))
    mark = server.mark()
    r = server.get("/bad-hold")
    assert r.status_code == 500 and r.text == "Internal Server Error\n"
    records = server.wait_for_record(r"the application's hold is refused", since=mark)
    assert len(records) == 1 and "M0-Channel" in records[0], records
    assert server.get("/plain").text == "plain\n"


def test_heartbeat(serve):
    server = serve("realtime_app:application", args=("--realtime",), env={"M0_SSE_HEARTBEAT_MS": "200"})
    s = SSE(server, "/hold?c=quiet")
    t0 = time.monotonic()
    b = s.next(timeout=5)
    assert b is not None and "comment" in b, b
    assert time.monotonic() - t0 < 5


def keepalive_timer(port):
    """The keepalive timer ss reports on the server's side of a connection
    to port, in seconds, or None."""
    out = subprocess.run(["ss", "-tnoH", "state", "established", f"( sport = :{port} )"],
                         capture_output=True, text=True, timeout=10).stdout
    m = re.search(r"timer:\(keepalive,(?:(\d+)min)?([\d.]+)(m?s)", out)
    if not m:
        return None
    secs = float(m.group(2)) / (1000 if m.group(3) == "ms" else 1)
    return int(m.group(1) or 0) * 60 + secs


@pytest.mark.parametrize("kind", ["sse", "websocket"])
@pytest.mark.parametrize("setting,want", [(None, 15), ("7", 7), ("0", None)])
def test_keepalive_on_held_sockets(serve, kind, setting, want):
    env = {"M0_STREAM_KEEPALIVE_S": setting} if setting is not None else None
    server = serve("realtime_app:application", args=("--realtime",), env=env)
    if kind == "sse":
        s = SSE(server, "/hold?c=k")
        server.post("/publish?c=k", data=b"x")
        s.event()
    else:
        s = ws_connect(server.url("/ws?c=k").replace("http", "ws", 1), open_timeout=HTTP_TIMEOUT)
        server.post("/publish?c=k", data=b"x")
        assert s.recv(timeout=HTTP_TIMEOUT) == "x"
    timer = keepalive_timer(server.port)
    s.close()
    if want is None:
        assert timer is None
    else:
        assert timer is not None and 0 < timer <= want, timer


def test_drain_closes_holds_cleanly(serve):
    room = start_room(serve, "flask")
    s = SSE(room.server, "/events")
    ws = ws_connect(room.server.url("/ws").replace("http", "ws", 1), open_timeout=HTTP_TIMEOUT)
    room.publish("before the drain")
    assert s.event()["data"] == b"before the drain"
    assert ws.recv(timeout=HTTP_TIMEOUT) == "before the drain"
    t0 = time.monotonic()
    room.server.send_signal(signal.SIGTERM)
    b = s.next(timeout=5)
    assert b is not None and b.get("retry"), b
    assert 1000 <= int(b["retry"]) <= 5000
    assert s.next(timeout=5) is None and s.ended, "the stream did not end cleanly"
    with pytest.raises(ConnectionClosed) as closed:
        ws.recv(timeout=5)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
    assert room.server.wait_exit(10) == 0
    assert time.monotonic() - t0 < 5.5


def test_http10_stream_ends_by_closing(serve):
    server = serve("realtime_app:application", args=("--realtime",))
    s = SSE(server, "/hold?c=old", version="HTTP/1.0")
    assert not s.chunked and "content-length" not in s.headers
    fid = server.post("/publish?c=old", data=b"x").json()["id"]
    assert s.event() == {"data": b"x", "id": fid}


@pytest.mark.gil  # a free-threaded build refuses the ASGI application first
def test_realtime_refused_beside_asgi(tmp_path):
    from conftest import M0SERVE
    p = subprocess.run([str(M0SERVE), "--realtime", "--app-dir", str(APPS), "asgi_raw:application"],
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert p.returncode == 78, p
    assert "--realtime holds streams for WSGI views" in p.stderr and "leave --realtime unset" in p.stderr


@pytest.mark.parametrize("how", [["--replay-frames", "4097"], ["M0_REPLAY_FRAMES=5000"]])
def test_replay_frames_cap(tmp_path, how):
    from conftest import M0SERVE
    import os
    env = dict(os.environ)
    args = []
    for h in how:
        if "=" in h and h.startswith("M0_"):
            k, v = h.split("=")
            env[k] = v
        else:
            args.append(h)
    for doctor in ([], ["--doctor"]):
        p = subprocess.run([str(M0SERVE), *doctor, *args, "--realtime", "--app-dir", str(APPS),
                            "realtime_app:application"], capture_output=True, text=True, timeout=60,
                           cwd=tmp_path, env=env)
        assert p.returncode == 78, p
        if doctor:
            report = json.loads(p.stdout.strip().splitlines()[-1])
            failed = [c for c in report["checks"] if not c["ok"]]
            assert failed[0]["name"] == "replay-frames" and "4096" in failed[0]["fix"]
        else:
            assert "at most 4096" in p.stderr


def test_doctor_reports_realtime(tmp_path):
    from conftest import M0SERVE
    import os
    env = {**os.environ, "M0_SSE_HEARTBEAT_MS": "2500", "M0_STREAM_KEEPALIVE_S": "30"}
    p = subprocess.run([str(M0SERVE), "--doctor", "--realtime", "--replay-frames", "128", "--app-dir", str(APPS),
                        "realtime_app:application"], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                       env=env)
    assert p.returncode == 0, p
    report = json.loads(p.stdout.strip().splitlines()[-1])
    assert report["realtime"] == {"enabled": True, "replay_frames": 128, "heartbeat_ms": 2500, "keepalive_s": 30,
                                  "message_path": "/ws/message", "max_frame": 65536}


def test_independent_go_client(serve, tmp_path):
    """r3labs/sse, a Go SSE client written apart from m0, reads a held
    stream and resumes it with the id it last saw."""
    client = tmp_path / "sseclient"
    build = subprocess.run(["go", "build", "-o", str(client), "./tests/e2e/sseclient"], cwd=ROOT,
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    room = start_room(serve, "flask")
    url = room.server.url("/events")
    proc = subprocess.Popen([str(client), "-url", url, "-n", "3"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "connected"
        ids = [room.publish(f"go {i}") for i in range(3)]
        out, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    got = [json.loads(line) for line in out.splitlines()]
    assert got == [{"id": ids[i], "data": f"go {i}", "event": ""} for i in range(3)], got
    missed = [room.publish(f"missed {i}") for i in range(2)]
    p = subprocess.run([str(client), "-url", url, "-n", "2", "-last", ids[-1]], capture_output=True, text=True,
                       timeout=60)
    lines = p.stdout.splitlines()
    assert lines[0] == "connected", p
    assert [json.loads(line)["id"] for line in lines[1:]] == missed, p
