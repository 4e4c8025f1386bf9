"""Publish frames to m0serve's realtime channels.

Under ``m0serve --realtime`` a view approves a held stream by answering
``M0-Hold: stream`` (SSE) or ``M0-Hold: websocket`` with ``M0-Channel: NAME``;
``publish(NAME, data)`` then reaches every subscriber of the channel. A
reconnecting SSE client is sent what it missed, or an ``m0-gap`` event.

``publish`` works in the server's process (a view, a thread of the
application, a command the application runs there) and in a child process a
view starts, when the view hands it the server's descriptors::

    subprocess.Popen([...], pass_fds=m0pub.child_fds())

Handed ``child_fds()`` (the event-id page and the bus), the child numbers its
frames from the counter every worker numbers from, and ``publish`` returns
the frame's id. Handed only ``bus_write_fds()``, the child still publishes,
unnumbered: a worker numbers the frame, and ``publish`` returns ``True``.
The descriptors are the only way to the server; there is no address. The
server names them to its children in the environment variable ``M0_BUS``.

In a process no m0serve started (a shell, a cron job, an application's own
tests) ``publish`` sends nothing: it warns once (``RuntimeWarning``) and
returns ``False``. From outside, publish through the database instead:
``cursor.execute(*m0pub.notify_sql(channel, data))`` under ``--pg-listen``.

The calls of the other m0serve implementation's ``m0pub`` (PyPI's
``m0serve``) are here too, so that an application moves between the two
unchanged: ``publish(channel, data, event=...)``, ``publish_with_id``,
``publish_frame``, ``sse_event``, ``next_event_id`` and ``notify_sql``.
"""

from __future__ import annotations

import errno
import os
import select
import stat
import struct
import threading
import time
import warnings
from typing import Callable, Optional, Union

__all__ = [
    "NotServing",
    "publish",
    "publish_with_id",
    "publish_frame",
    "sse_event",
    "next_event_id",
    "notify_sql",
    "child_fds",
    "bus_write_fds",
    "MAX_FRAME",
    "MAX_CHANNEL",
    "MAX_EVENT",
    "NO_EVENT_ID",
]

#: The largest frame a channel takes, in bytes.
MAX_FRAME = 64 * 1024

#: The longest channel name, in bytes of UTF-8.
MAX_CHANNEL = 1024

#: The longest SSE event type a frame may carry, in bytes of UTF-8.
MAX_EVENT = 255

#: What ``next_event_id`` returns and ``sse_event`` takes for "no id": the
#: server numbers each frame as it publishes it.
NO_EVENT_ID = -1

#: The environment variable in which a worker names the page and the bus to
#: its child processes: ``page=FD:INODE;bus=FD:INODE,FD:INODE,...``.
BUS_ENV = "M0_BUS"

Data = Union[str, bytes, bytearray, memoryview]


class NotServing(RuntimeError):
    """No m0serve is reachable from this process to publish to."""


# The page (prefork/page.go): a 4096-byte memfd (an unlinked file on macOS). The counter's word is read
# and written only under a POSIX write lock on its 8 bytes.
_PAGE_MAGIC = b"m0page\x00\x01"
_OFF_EPOCH = 8
_OFF_SEQ = 16

# A message on the bus (prefork/bus.go): kind, then the sender, 0xffff for a
# child process. A frame with an event sets the channel length's top bit and
# carries the event's length (one byte) and the event after the channel.
_NUMBERED = b"F\xff\xff"
_UNNUMBERED = b"U\xff\xff"
_EVENT_FLAG = 0x8000

# POSIX locks belong to the process, not to a thread: this orders the
# threads of one process, the fcntl lock the processes.
_page_lock = threading.Lock()

# Set in a process forked from the server: it inherited _m0, but not the Go
# runtime behind it, so it publishes over the bus like any child.
_forked = False


def _after_fork() -> None:
    global _forked, _page_lock
    _forked = True
    _page_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)

_NOT_INSIDE = (
    "m0pub.publish sent nothing: it reaches subscribers only inside m0serve, and this Python process "
    "was not started by it (publish from a view, from a thread of the application, or from a command "
    "the application runs in the server, e.g. Django's call_command in a view; from a child process a "
    "view starts, pass it pass_fds=m0pub.child_fds(); start the server with m0serve --realtime; from "
    "outside the server, execute m0pub.notify_sql(...) against the database of --pg-listen)"
)


def _publisher() -> Optional[Callable[..., object]]:
    """The server's publish in its own process; None in any other."""
    if _forked:
        return None
    try:
        import _m0  # type: ignore[import-not-found]
    except ImportError:
        return None
    publish: Callable[..., object] = _m0.publish
    return publish


_warned = False


def _not_inside() -> None:
    """Warns, once a process, that a publish outside m0serve went nowhere."""
    global _warned
    if not _warned:
        _warned = True
        warnings.warn(_NOT_INSIDE, RuntimeWarning, stacklevel=2)


def _bus_env() -> Optional[tuple[tuple[int, int], list[tuple[int, int]]]]:
    """The page's and the bus's (descriptor, inode) pairs, as M0_BUS names
    them; None where it is not set (no m0serve started this process)."""
    value = os.environ.get(BUS_ENV)
    if value is None:
        return None
    try:
        page_part, bus_part = value.split(";")
        page_key, page_value = page_part.split("=", 1)
        bus_key, bus_value = bus_part.split("=", 1)
        if page_key != "page" or bus_key != "bus":
            raise ValueError(value)
        page = _fd_ino(page_value)
        bus = [_fd_ino(v) for v in bus_value.split(",")]
    except ValueError:
        raise NotServing(
            f"{BUS_ENV}={value!r} is not what m0serve sets "
            "(page=FD:INODE;bus=FD:INODE,FD:INODE,...)"
        ) from None
    return page, bus


def _fd_ino(s: str) -> tuple[int, int]:
    fd, ino = s.split(":")
    if not (fd.isascii() and fd.isdigit() and ino.isascii() and ino.isdigit()):
        raise ValueError(s)
    return int(fd), int(ino)


def _is(fd: int, ino: int, kind: Callable[[int], bool]) -> bool:
    """Whether fd is still the descriptor the server named: same inode, same kind."""
    try:
        st = os.fstat(fd)
    except OSError:
        return False
    return st.st_ino == ino and kind(st.st_mode)


def _page_ok(fd: int, ino: int) -> bool:
    if not _is(fd, ino, stat.S_ISREG):
        return False
    try:
        return os.pread(fd, len(_PAGE_MAGIC), 0) == _PAGE_MAGIC
    except OSError:
        return False


def _not_handed(caller: str, fd: int) -> NotServing:
    return NotServing(
        f"m0pub.{caller}: descriptor {fd}, which {BUS_ENV} names, is not the one m0serve passed: "
        "this process was not handed it (start it with pass_fds=m0pub.child_fds())"
    )


def child_fds() -> list[int]:
    """The descriptors to hand a child process so that it can publish numbered
    frames: the event-id page, then the bus (one per worker).

    ``subprocess.Popen([...], pass_fds=m0pub.child_fds())``. In a process no
    m0serve started, none: ``[]``. Raises ``NotServing`` in a process that
    was not handed the ones ``M0_BUS`` names.
    """
    env = _bus_env()
    if env is None:
        return []
    page, bus = env
    if not _page_ok(*page):
        raise _not_handed("child_fds", page[0])
    return [page[0], *_handed_bus("child_fds", bus)]


def bus_write_fds() -> list[int]:
    """The bus's descriptors alone (one per worker): a child process handed
    only these publishes unnumbered frames, which a worker numbers.

    In a process no m0serve started, none: ``[]``. Raises ``NotServing`` in a
    process that was not handed the ones ``M0_BUS`` names.
    """
    env = _bus_env()
    if env is None:
        return []
    return _handed_bus("bus_write_fds", env[1])


def _handed_bus(caller: str, bus: list[tuple[int, int]]) -> list[int]:
    for fd, ino in bus:
        if not _is(fd, ino, stat.S_ISSOCK):
            raise _not_handed(caller, fd)
    return [fd for fd, _ in bus]


def publish(channel: str, data: Data, event: Optional[str] = None) -> Union[str, bool]:
    """Publish ``data`` as the next frame of ``channel``.

    ``data`` is text (sent as UTF-8) or bytes of up to ``MAX_FRAME``. ``event``
    is the frame's SSE event type (an ``EventSource`` dispatches it to that
    type's listeners; ``None`` or ``""``: a message event); a WebSocket
    subscriber is sent the data alone. Returns the frame's event id, or
    ``False`` when the channel refused the frame (a name that is empty, over
    ``MAX_CHANNEL`` bytes or begins with a control character, data over
    ``MAX_FRAME``, an event over ``MAX_EVENT`` bytes, with a control character
    or beginning ``m0-``, the server's own events).

    In a child process handed ``child_fds()`` it returns the id too; handed
    only ``bus_write_fds()``, ``True``: the frame is sent, and a worker
    numbers it. A child waits while the bus is full, never drops a frame.

    In a process no m0serve started, nothing is sent: it warns once and
    returns ``False``. Raises ``NotServing`` under an m0serve that has no
    channels (no ``--realtime``) and in a child not handed the descriptors,
    ``TypeError`` for data of another type.
    """
    if not isinstance(channel, str):
        raise TypeError(f"m0pub.publish: the channel is a str, not {type(channel).__name__}")
    if event is not None and not isinstance(event, str):
        raise TypeError(f"m0pub.publish: the event is a str, not {type(event).__name__}")
    if isinstance(data, str):
        payload = data.encode("utf-8")
    elif isinstance(data, bytes):
        payload = data
    elif isinstance(data, (bytearray, memoryview)):
        payload = bytes(data)
    else:
        raise TypeError(f"m0pub.publish: data is str or bytes, not {type(data).__name__}")
    server = _publisher()
    if server is None:
        return _publish_child(channel, payload, event or "")
    result = server(channel, payload, event) if event else server(channel, payload)
    if result is None:
        raise NotServing(
            "m0serve serves this application without realtime channels: start it with --realtime "
            "(or, in a Go program, call m0.PublishTo with the hub)"
        )
    if result is False:
        return False
    return str(result)


def publish_with_id(channel: str, data: Data, event: Optional[str] = None) -> tuple[int, Union[str, int]]:
    """``publish``, answered as ``(sent, id)``: ``(1, id)`` for a frame sent
    and numbered, ``(1, NO_EVENT_ID)`` for one sent unnumbered (a child handed
    only ``bus_write_fds()``; a worker numbers it), ``(0, NO_EVENT_ID)`` for one
    not sent, as the other implementation answers.
    """
    result = publish(channel, data, event)
    if result is False:
        return 0, NO_EVENT_ID
    return 1, (NO_EVENT_ID if result is True else result)


def publish_frame(channel: str, frame: Union[str, Data], event_id: Union[int, str] = NO_EVENT_ID) -> int:
    """Publish a frame written as SSE text (``sse_event``'s, or ``"event:
    tick\\ndata: 1\\n\\n"``): its ``data:`` lines, joined by line feeds, as the
    frame's data and its ``event:`` as its event type. The server numbers the
    frame itself, so an ``id:`` line and ``event_id`` are not used; comments and
    ``retry:`` are dropped. Returns 1 when sent, 0 when not (no ``data:`` line,
    which an ``EventSource`` would not dispatch either, or a refusal).
    """
    if isinstance(frame, (bytes, bytearray, memoryview)):
        text = bytes(frame).decode("utf-8", "surrogateescape")  # bytes that are not UTF-8 go as they are
    elif isinstance(frame, str):
        text = frame
    else:
        raise TypeError(f"m0pub.publish_frame: the frame is str or bytes, not {type(frame).__name__}")
    data: list[str] = []
    event = ""
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if not line or line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
        elif field == "event":
            event = value
    if not data:
        return 0
    payload = "\n".join(data).encode("utf-8", "surrogateescape")
    return publish_with_id(channel, payload, event)[0]


def sse_event(data: str, event: Optional[str] = None, event_id: Union[int, str] = NO_EVENT_ID) -> bytes:
    """``data`` written as one SSE event: an ``id:`` line (none for
    ``NO_EVENT_ID``), an ``event:`` line (none for ``None``), a ``data:`` line for
    each of its lines, and the blank line that ends it, in UTF-8."""
    lines = []
    if event_id != NO_EVENT_ID and event_id is not None:
        lines.append(f"id: {event_id}")
    if event:
        lines.append("event: " + event)
    lines += ["data: " + line for line in (data.splitlines() or [""])]
    return ("\n".join(lines) + "\n\n").encode("utf-8")


def next_event_id() -> int:
    """``NO_EVENT_ID``: m0serve numbers each frame as it publishes it (ids are
    ``EPOCH-SEQ`` strings, which ``publish`` returns), so there is no id to take
    ahead of a publish."""
    return NO_EVENT_ID


def notify_sql(channel: str, data: str, event: Optional[str] = None) -> tuple[str, list[str]]:
    """The SQL that publishes ``data`` on ``channel`` from outside the server,
    through the database every instance started with ``--pg-listen`` shares,
    as ``(statement, parameters)`` for a DB-API cursor::

        with connection.cursor() as cur:
            cur.execute(*m0pub.notify_sql("news", "hello", event="greeting"))

    The frame is published when the transaction commits (``m0.publish``,
    docs/pg.md), and refused there, with an error, as ``publish`` refuses it.
    """
    return "SELECT m0.publish(%s, %s, %s)", [channel, data, event or ""]


def _valid(name: bytes, payload: bytes, event: bytes) -> bool:
    """realtime.ValidChannel, realtime.ValidEvent, and the frame's size."""
    return (
        0 < len(name) <= MAX_CHANNEL
        and name[0] >= 0x20
        and name[0] != 0x7F
        and len(payload) <= MAX_FRAME
        and len(event) <= MAX_EVENT
        and not event.startswith(b"m0-")
        and not any(c < 0x20 or c == 0x7F for c in event)
    )


def _publish_child(channel: str, payload: bytes, event: str) -> Union[str, bool]:
    env = _bus_env()
    if env is None:
        _not_inside()
        return False
    page, bus = env
    handed = [fd for fd, ino in bus if _is(fd, ino, stat.S_ISSOCK)]
    if not handed:
        raise NotServing(
            f"m0pub.publish: this process has the server's {BUS_ENV} but not its descriptors: "
            "start it with pass_fds=m0pub.child_fds() (or pass_fds=m0pub.bus_write_fds())"
        )
    name = channel.encode("utf-8")
    ev = event.encode("utf-8")
    if not _valid(name, payload, ev):
        return False
    if ev:
        body = struct.pack("<H", len(name) | _EVENT_FLAG) + name + bytes([len(ev)]) + ev + payload
    else:
        body = struct.pack("<H", len(name)) + name + payload
    if len(handed) < len(bus) or not _page_ok(*page):
        # Any worker numbers it and hands it to the others.
        _send(handed[0], _UNNUMBERED + body)
        return True
    epoch, seq = _next_id(page[0])
    message = _NUMBERED + struct.pack("<QQ", epoch, seq) + body
    for fd in handed:  # every worker's inbox, each delivers it to its own subscribers
        _send(fd, message)
    return _id_string(epoch, seq)


def _next_id(fd: int) -> tuple[int, int]:
    """Allocates the next id from the page, as Page.Next does."""
    import fcntl  # imported here, so that m0pub imports where there is no fcntl (Windows)

    with _page_lock:
        fcntl.lockf(fd, fcntl.LOCK_EX, 8, _OFF_SEQ, os.SEEK_SET)  # F_SETLKW on bytes 16..23
        try:
            (seq,) = struct.unpack("<Q", os.pread(fd, 8, _OFF_SEQ))
            seq += 1
            os.pwrite(fd, struct.pack("<Q", seq), _OFF_SEQ)
        finally:
            fcntl.lockf(fd, fcntl.LOCK_UN, 8, _OFF_SEQ, os.SEEK_SET)
    (epoch,) = struct.unpack("<Q", os.pread(fd, 8, _OFF_EPOCH))
    return epoch, seq


def _send(fd: int, message: bytes) -> None:
    """Writes one datagram to fd, waiting while the inbox is full: the socket
    may be non-blocking (its open file description is the server's)."""
    poll: Optional[select.poll] = None
    pause = 0.001
    while True:
        try:
            os.write(fd, message)
            return
        except BlockingIOError:
            pass
        except OSError as e:
            if e.errno in (errno.ECONNREFUSED, errno.ENOTCONN, errno.EPIPE):
                raise NotServing("m0pub.publish: the server has gone (its bus is closed)") from None
            if e.errno != errno.ENOBUFS:
                raise
            # macOS fails a datagram to a full inbox at once (ENOBUFS), and
            # the socket polls writable all the while: try again shortly.
            time.sleep(pause)
            pause = min(2 * pause, 0.05)
            continue
        if poll is None:
            poll = select.poll()
            poll.register(fd, select.POLLOUT)
        poll.poll()


_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def _id_string(epoch: int, seq: int) -> str:
    """The id as the server writes it (realtime.ID.String): the epoch in base 36, '-', seq."""
    digits = []
    while True:
        epoch, d = divmod(epoch, 36)
        digits.append(_DIGITS[d])
        if epoch == 0:
            break
    return "".join(reversed(digits)) + "-" + str(seq)
