"""m0pub outside a server, and with a stand-in for the server's _m0."""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import textwrap
import threading
import types
import warnings
from typing import Any, Iterator, Optional, Sequence

import pytest

from m0serve import m0pub


def test_outside_the_server_it_sends_nothing_and_says_why_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """As the other m0serve's m0pub does (it returns 0), so that an
    application's own tests run its views without a server; the warning
    says what to do, once."""
    monkeypatch.delenv("M0_BUS", raising=False)
    monkeypatch.setattr(m0pub, "_warned", False)
    with pytest.warns(RuntimeWarning, match="sent nothing.*inside m0serve.*--realtime.*notify_sql"):
        assert m0pub.publish("room", "hello") is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert m0pub.publish("room", "again", event="tick") is False
        assert m0pub.publish_with_id("room", "again") == (0, m0pub.NO_EVENT_ID)
        assert m0pub.publish_frame("room", "data: x\n\n") == 0


class FakeM0:
    """What _m0 does, recorded: the server's side is tested end to end."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.calls: list[tuple[str, bytes]] = []
        self.events: list[Optional[str]] = []

    def publish(self, channel: str, data: bytes, event: Optional[str] = None) -> Any:
        assert type(channel) is str and type(data) is bytes and (event is None or type(event) is str)
        self.calls.append((channel, data))
        self.events.append(event)
        return self.answer


@pytest.fixture
def fake(request: pytest.FixtureRequest) -> Iterator[FakeM0]:
    f = FakeM0(getattr(request, "param", "k-1"))
    mod = types.ModuleType("_m0")
    mod.publish = f.publish  # type: ignore[attr-defined]
    sys.modules["_m0"] = mod
    try:
        yield f
    finally:
        del sys.modules["_m0"]


@pytest.mark.parametrize(
    "data,sent",
    [("caf\u00e9", "caf\u00e9".encode()), (b"\x00\xff", b"\x00\xff"), (bytearray(b"ab"), b"ab"), (memoryview(b"cd"), b"cd")],
)
def test_data_goes_as_bytes(fake: FakeM0, data: m0pub.Data, sent: bytes) -> None:
    assert m0pub.publish("room", data) == "k-1"
    assert fake.calls == [("room", sent)]


@pytest.mark.parametrize("fake", [False], indirect=True)
def test_a_refused_frame_is_false(fake: FakeM0) -> None:
    assert m0pub.publish("\x01reserved", "x") is False


@pytest.mark.parametrize("fake", [None], indirect=True)
def test_a_server_without_realtime_says_so(fake: FakeM0) -> None:
    with pytest.raises(m0pub.NotServing, match="--realtime"):
        m0pub.publish("room", "x")


def test_an_event_goes_to_the_server_beside_the_data(fake: FakeM0) -> None:
    assert m0pub.publish("room", "x", event="tick") == "k-1"
    assert m0pub.publish("room", "y", event="") == "k-1"  # none, as None is
    assert m0pub.publish("room", "z", None) == "k-1"
    assert fake.calls == [("room", b"x"), ("room", b"y"), ("room", b"z")]
    assert fake.events == ["tick", None, None]


def test_the_other_implementations_calls(fake: FakeM0) -> None:
    """publish_with_id, publish_frame, sse_event, next_event_id and
    notify_sql, as an application written for the other m0serve calls them."""
    assert m0pub.publish_with_id("room", "x", event="e") == (1, "k-1")
    frame = m0pub.sse_event("line 1\nline 2", event="update", event_id=7)
    assert frame == b"id: 7\nevent: update\ndata: line 1\ndata: line 2\n\n"
    assert m0pub.sse_event("x") == b"data: x\n\n"
    assert m0pub.sse_event("", event_id=m0pub.next_event_id()) == b"data: \n\n"
    assert m0pub.publish_frame("room", frame) == 1
    assert m0pub.publish_frame("room", ": a comment\r\nretry: 5\r\ndata:no space\r\n\r\n") == 1
    assert m0pub.publish_frame("room", b"event: only\n\n") == 0  # no data: not dispatched, not sent
    assert m0pub.publish_frame("room", bytearray(b"data: \xff raw\n\n")) == 1  # not UTF-8: as it is
    assert fake.calls[1:] == [("room", b"line 1\nline 2"), ("room", b"no space"), ("room", b"\xff raw")]
    assert fake.events[1:] == ["update", None, None]
    assert m0pub.next_event_id() == m0pub.NO_EVENT_ID == -1
    assert m0pub.notify_sql("news", "hello", event="greeting") == (
        "SELECT m0.publish(%s, %s, %s)", ["news", "hello", "greeting"])
    assert m0pub.notify_sql("news", "hello")[1] == ["news", "hello", ""]


@pytest.mark.parametrize("fake", [False], indirect=True)
def test_publish_with_id_of_a_refused_frame(fake: FakeM0) -> None:
    assert m0pub.publish_with_id("room", "x", event="m0-gap") == (0, m0pub.NO_EVENT_ID)


def test_other_types_are_refused(fake: FakeM0) -> None:
    with pytest.raises(TypeError, match="str or bytes, not int"):
        m0pub.publish("room", 5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="channel is a str"):
        m0pub.publish(b"room", "x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="event is a str"):
        m0pub.publish("room", "x", event=b"tick")  # type: ignore[arg-type]
    assert fake.calls == []


# A child process a view starts: the page and the bus are real (a memfd and
# datagram socketpairs, laid out as prefork/page.go and prefork/bus.go say),
# the child a real Python process handed them with pass_fds.

EPOCH = 1767225600000  # "mjuohs00" in base 36, as Go's strconv writes it
EPOCH36 = "mjuohs00"


class Mesh:
    """What a worker holds: the page, and the inboxes of its workers (the
    readers here) with their write ends."""

    def __init__(self, workers: int, epoch: int = EPOCH, seq: int = 0) -> None:
        self.page = os.memfd_create("m0-page")
        os.ftruncate(self.page, 4096)
        os.pwrite(self.page, b"m0page\x00\x01" + struct.pack("<QQ", epoch, seq), 0)
        pairs = [socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM) for _ in range(workers)]
        self.readers = [r for r, _ in pairs]
        self.writers = [w for _, w in pairs]
        for r in self.readers:
            r.settimeout(10)

    def env(self, page: tuple[int, int] | None = None, bus: list[tuple[int, int]] | None = None) -> str:
        """M0_BUS as a worker sets it, or naming what page and bus say."""
        if page is None:
            page = (self.page, os.fstat(self.page).st_ino)
        if bus is None:
            bus = [(w.fileno(), os.fstat(w.fileno()).st_ino) for w in self.writers]
        return f"page={page[0]}:{page[1]};bus=" + ",".join(f"{fd}:{ino}" for fd, ino in bus)

    def seq(self) -> int:
        value: int = struct.unpack("<Q", os.pread(self.page, 8, 16))[0]
        return value

    def pending(self, i: int) -> list[bytes]:
        """What is in worker i's inbox now."""
        got = []
        r = self.readers[i]
        r.setblocking(False)
        try:
            while True:
                got.append(r.recv(1 << 17))
        except BlockingIOError:
            pass
        finally:
            r.settimeout(10)
        return got

    def close(self) -> None:
        os.close(self.page)
        for s in self.readers + self.writers:
            s.close()


@pytest.fixture
def mesh(monkeypatch: pytest.MonkeyPatch) -> Iterator[Mesh]:
    m = Mesh(2)
    monkeypatch.setenv("M0_BUS", m.env())
    try:
        yield m
    finally:
        m.close()


# The child imports the m0serve the test does.
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(m0pub.__file__)))


def child(code: str, pass_fds: Sequence[int], *args: str) -> subprocess.Popen[str]:
    """A child process the view (this test) starts, with this environment:
    M0_BUS as the fixture set it."""
    env = dict(os.environ, PYTHONPATH=PACKAGE_ROOT)
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        pass_fds=pass_fds, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def outcome(p: subprocess.Popen[str], stdin: str = "") -> Any:
    out, err = p.communicate(stdin, timeout=60)
    assert p.returncode == 0, err
    return json.loads(out)


PUBLISH = """
    import json, sys
    from m0serve import m0pub
    out = []
    for channel, data, *event in json.loads(sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read()):
        try:
            out.append(m0pub.publish(channel, data, *event))
        except m0pub.NotServing as e:
            out.append("NotServing: " + str(e))
    print(json.dumps(out))
"""


def publish_in_child(pass_fds: Sequence[int], *frames: tuple[str, ...]) -> list[Any]:
    got: list[Any] = outcome(child(PUBLISH, pass_fds), json.dumps(frames))
    return got


def test_a_child_handed_child_fds_publishes_numbered_frames_to_every_worker(mesh: Mesh) -> None:
    os.pwrite(mesh.page, struct.pack("<Q", 41), 16)
    fds = m0pub.child_fds()
    assert fds == [mesh.page] + [w.fileno() for w in mesh.writers]
    assert publish_in_child(fds, ("room", "caf\u00e9"), ("\u00e9t\u00e9", "")) == [f"{EPOCH36}-42", f"{EPOCH36}-43"]
    want = [
        b"F\xff\xff" + struct.pack("<QQH", EPOCH, 42, 4) + b"room" + "caf\u00e9".encode(),
        b"F\xff\xff" + struct.pack("<QQH", EPOCH, 43, 5) + "\u00e9t\u00e9".encode(),
    ]
    for i in range(2):
        assert mesh.pending(i) == want
    assert mesh.seq() == 43


def test_ids_are_written_as_the_server_writes_them() -> None:
    assert m0pub._id_string(EPOCH, 7) == f"{EPOCH36}-7"
    assert m0pub._id_string(0, 1) == "0-1"
    assert m0pub._id_string(2**64 - 1, 2**64 - 1) == f"3w5e11264sgsf-{2**64 - 1}"


CONCURRENT = """
    import json, sys, threading
    from m0serve import m0pub
    ids = []
    def run(t):
        for i in range(10):
            ids.append(m0pub.publish("c", f"{sys.argv[1]}.{t}.{i}"))
    threads = [threading.Thread(target=run, args=(t,)) for t in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps(ids))
"""


def test_concurrent_children_take_unique_ids_from_the_page(mesh: Mesh) -> None:
    got: list[list[bytes]] = [[], []]

    def read(i: int) -> None:  # while the children write: 200 frames outgrow an inbox
        while len(got[i]) < 200:
            got[i].append(mesh.readers[i].recv(1 << 17))

    readers = [threading.Thread(target=read, args=(i,)) for i in range(2)]
    for t in readers:
        t.start()
    children = [child(CONCURRENT, m0pub.child_fds(), str(n)) for n in range(4)]
    ids = [i for p in children for i in outcome(p)]
    for t in readers:
        t.join(30)
    assert len(ids) == 200 and len(set(ids)) == 200
    assert sorted(int(i.split("-")[1]) for i in ids) == list(range(1, 201))
    assert {i.split("-")[0] for i in ids} == {EPOCH36}
    assert mesh.seq() == 200
    for i in range(2):
        assert len(got[i]) == 200
        frames = {}
        for m in got[i]:
            assert m[:3] == b"F\xff\xff"
            epoch, seq, n = struct.unpack("<QQH", m[3:21])
            assert epoch == EPOCH and m[21 : 21 + n] == b"c"
            frames[seq] = m[21 + n :].decode()
        assert sorted(frames) == list(range(1, 201))
        assert sorted(frames.values()) == sorted(f"{c}.{t}.{k}" for c in range(4) for t in range(5) for k in range(10))
    assert mesh.pending(0) == mesh.pending(1) == []


def test_a_child_handed_only_the_bus_publishes_unnumbered_to_the_first_worker(mesh: Mesh) -> None:
    fds = m0pub.bus_write_fds()
    assert fds == [w.fileno() for w in mesh.writers]
    assert publish_in_child(fds, ("room", "hi"), ("r", "\u00e9")) == [True, True]
    assert mesh.pending(0) == [
        b"U\xff\xff" + struct.pack("<H", 4) + b"room" + b"hi",
        b"U\xff\xff" + struct.pack("<H", 1) + b"r" + "\u00e9".encode(),
    ]
    assert mesh.pending(1) == []  # the first worker numbers it and publishes it to the others
    assert mesh.seq() == 0


def test_a_page_that_is_not_the_one_named_is_not_counted_on(mesh: Mesh, monkeypatch: pytest.MonkeyPatch) -> None:
    # The page's number passed, but its inode not the one M0_BUS names.
    monkeypatch.setenv("M0_BUS", mesh.env(page=(mesh.page, os.fstat(mesh.page).st_ino + 1)))
    assert publish_in_child([mesh.page] + m0pub.bus_write_fds(), ("room", "x")) == [True]
    assert mesh.pending(0) == [b"U\xff\xff\x04\x00roomx"]
    assert mesh.seq() == 0


def test_descriptors_not_handed_are_refused(mesh: Mesh, monkeypatch: pytest.MonkeyPatch) -> None:
    # Nothing passed (close_fds closed them).
    [refused] = publish_in_child([], ("room", "x"))
    assert refused.startswith("NotServing: ") and "pass_fds=m0pub.child_fds()" in refused
    # The bus's numbers are passed, but hold other sockets: their inodes do not match.
    other = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        ino = os.fstat(other[1].fileno()).st_ino
        monkeypatch.setenv("M0_BUS", mesh.env(bus=[(w.fileno(), ino) for w in mesh.writers]))
        [refused] = publish_in_child([mesh.page] + [w.fileno() for w in mesh.writers], ("room", "x"))
        assert refused.startswith("NotServing: ") and "pass_fds=m0pub.child_fds()" in refused
        # The page named is a socket of the right inode: not a page.
        monkeypatch.setenv("M0_BUS", mesh.env(page=(other[1].fileno(), ino)))
        assert publish_in_child([other[1].fileno()] + [w.fileno() for w in mesh.writers], ("room", "x")) == [True]
        assert mesh.pending(0) == [b"U\xff\xff\x04\x00roomx"]
    finally:
        other[0].close()
        other[1].close()
    assert mesh.pending(0) == mesh.pending(1) == []
    assert mesh.seq() == 0
    # And in this process, child_fds and bus_write_fds will not hand them on.
    monkeypatch.setenv("M0_BUS", mesh.env(bus=[(mesh.writers[0].fileno(), 1)]))
    with pytest.raises(m0pub.NotServing, match=r"bus_write_fds: descriptor \d+, which M0_BUS names, is not the one"):
        m0pub.bus_write_fds()
    with pytest.raises(m0pub.NotServing, match=r"child_fds: descriptor \d+, which M0_BUS names, is not the one"):
        m0pub.child_fds()
    monkeypatch.setenv("M0_BUS", mesh.env(page=(mesh.page, 1)))
    with pytest.raises(m0pub.NotServing, match=rf"descriptor {mesh.page}, which M0_BUS names"):
        m0pub.child_fds()
    assert m0pub.bus_write_fds() == [w.fileno() for w in mesh.writers]


def test_child_fds_outside_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("M0_BUS", raising=False)
    assert m0pub.child_fds() == [] and m0pub.bus_write_fds() == []  # nothing to hand on
    for bad in ("", "page=3:4", "page=3:4;bus=", "bus=3:4;page=5:6", "page=3;bus=4:5", "page=-3:4;bus=5:6"):
        monkeypatch.setenv("M0_BUS", bad)
        with pytest.raises(m0pub.NotServing, match="is not what m0serve sets"):
            m0pub.child_fds()


def test_a_child_refuses_what_the_channel_would(mesh: Mesh) -> None:
    big = "x" * m0pub.MAX_FRAME
    name = "\u00e9" * 512  # 1024 bytes
    got = publish_in_child(
        m0pub.child_fds(),
        ("", "x"), ("\x01reserved", "x"), ("\x1f", "x"), ("\x7fdel", "x"), ("x" * 1025, "x"), (name + "x", "x"),
        ("room", big + "x"), ("room", "\u00e9" * (m0pub.MAX_FRAME // 2) + "x"),
        ("room", big), (name, "x"), (" room", ""), ("r\x01", "x"),
    )
    assert got[:8] == [False] * 8
    assert got[8:] == [f"{EPOCH36}-{n}" for n in range(1, 5)]  # no id spent on a refused frame
    sent = mesh.pending(0)
    assert [m[3:21] for m in sent] == [struct.pack("<QQH", EPOCH, n, k) for n, k in ((1, 4), (2, 1024), (3, 5), (4, 2))]
    assert len(sent[0]) == 3 + 18 + 4 + m0pub.MAX_FRAME
    assert mesh.pending(1) == sent


def test_a_child_sends_an_event_after_the_channel(mesh: Mesh) -> None:
    """The channel length's top bit, then the event's length and the event
    (prefork/bus.go); an event the server would refuse is refused here."""
    got = publish_in_child(
        m0pub.child_fds(),
        ("room", "x", "tick"), ("room", "y", ""), ("room", "z", "m0-gap"), ("room", "z", "a\nb"),
        ("room", "z", "e" * 256), ("room", "w", "\u00e9" * 127),
    )
    assert got == [f"{EPOCH36}-1", f"{EPOCH36}-2", False, False, False, f"{EPOCH36}-3"]
    sent = mesh.pending(0)
    assert sent[0] == b"F\xff\xff" + struct.pack("<QQH", EPOCH, 1, 4 | 0x8000) + b"room" + b"\x04tick" + b"x"
    assert sent[1] == b"F\xff\xff" + struct.pack("<QQH", EPOCH, 2, 4) + b"room" + b"y"
    assert sent[2][3 + 18 + 4:] == bytes([254]) + "\u00e9".encode() * 127 + b"w"
    assert mesh.pending(1) == sent
    # Handed the bus alone: unnumbered, the event carried the same way.
    assert publish_in_child(m0pub.bus_write_fds(), ("room", "v", "tock")) == [True]
    assert mesh.pending(0) == [b"U\xff\xff" + struct.pack("<H", 4 | 0x8000) + b"room\x04tock" + b"v"]


def test_a_child_waits_for_a_full_nonblocking_inbox(mesh: Mesh) -> None:
    # The bus's sockets share their open file description with Go's, which
    # made them non-blocking: a child's write meets EAGAIN when an inbox is full.
    w = mesh.writers[1]
    w.setblocking(False)
    assert os.get_blocking(w.fileno()) is False
    filler = 0
    with pytest.raises(BlockingIOError):
        while True:
            w.send(b"." * 1000)
            filler += 1
    p = child(PUBLISH, m0pub.child_fds(), json.dumps([("room", "late")]))
    with pytest.raises(subprocess.TimeoutExpired):
        p.wait(1)  # it waits, neither failing nor dropping the frame
    assert mesh.pending(0) == [b"F\xff\xff" + struct.pack("<QQH", EPOCH, 1, 4) + b"roomlate"]
    got: list[bytes] = []
    drain = threading.Thread(target=lambda: got.extend(mesh.readers[1].recv(1 << 17) for _ in range(filler + 1)))
    drain.start()
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert json.loads(out) == [f"{EPOCH36}-1"]
    drain.join(10)
    assert got[:filler] == [b"." * 1000] * filler
    assert got[filler:] == [b"F\xff\xff" + struct.pack("<QQH", EPOCH, 1, 4) + b"roomlate"]


def test_a_child_of_a_gone_server_is_told(mesh: Mesh) -> None:
    for r in mesh.readers:
        r.close()  # the inboxes' read ends: the supervisor has gone
    [refused] = publish_in_child(m0pub.bus_write_fds(), ("room", "x"))
    assert refused == "NotServing: m0pub.publish: the server has gone (its bus is closed)"
    mesh.readers = []


def test_a_process_forked_from_the_server_publishes_over_the_bus(mesh: Mesh, fake: FakeM0) -> None:
    # It inherited _m0 but not the Go runtime behind it (multiprocessing's fork).
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = 0 if m0pub.publish("room", "forked") == f"{EPOCH36}-1" and fake.calls == [] else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert mesh.pending(0) == [b"F\xff\xff" + struct.pack("<QQH", EPOCH, 1, 4) + b"roomforked"]
    assert m0pub.publish("room", "here") == "k-1"  # the server's own process still uses _m0
    assert fake.calls == [("room", b"here")]
