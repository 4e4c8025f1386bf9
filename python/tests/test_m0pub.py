"""m0pub outside a server, and with a stand-in for the server's _m0."""

from __future__ import annotations

import sys
import types
from typing import Any, Iterator

import pytest

from m0serve import m0pub


def test_outside_the_server_it_says_what_to_do() -> None:
    with pytest.raises(m0pub.NotServing, match="needs to run inside m0serve.*--realtime"):
        m0pub.publish("room", "hello")


class FakeM0:
    """What _m0 does, recorded: the server's side is tested end to end."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.calls: list[tuple[str, bytes]] = []

    def publish(self, channel: str, data: bytes) -> Any:
        assert type(channel) is str and type(data) is bytes
        self.calls.append((channel, data))
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


def test_other_types_are_refused(fake: FakeM0) -> None:
    with pytest.raises(TypeError, match="str or bytes, not int"):
        m0pub.publish("room", 5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="channel is a str"):
        m0pub.publish(b"room", "x")  # type: ignore[arg-type]
    assert fake.calls == []
