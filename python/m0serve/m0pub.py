"""Publish frames to m0serve's realtime channels.

Under ``m0serve --realtime`` a view approves a held stream by answering
``M0-Hold: stream`` (SSE) or ``M0-Hold: websocket`` with ``M0-Channel: NAME``;
``publish(NAME, data)`` then reaches every subscriber of the channel. A
reconnecting SSE client is sent what it missed, or an ``m0-gap`` event.
"""

from __future__ import annotations

from typing import Callable, Literal, Union

__all__ = ["NotServing", "publish", "MAX_FRAME"]

#: The largest frame a channel takes, in bytes.
MAX_FRAME = 64 * 1024

Data = Union[str, bytes, bytearray, memoryview]


class NotServing(RuntimeError):
    """No m0serve is reachable from this process to publish to."""


def _publisher() -> Callable[[str, bytes], object]:
    try:
        import _m0  # type: ignore[import-not-found]
    except ImportError:
        raise NotServing(
            "m0pub.publish needs to run inside m0serve: this Python process was not started by it "
            "(publish from a view, from a thread of the application, or from a command the application "
            "runs in the server, e.g. Django's call_command in a view; start the server with "
            "m0serve --realtime)"
        ) from None
    publish: Callable[[str, bytes], object] = _m0.publish
    return publish


def publish(channel: str, data: Data) -> Union[str, Literal[False]]:
    """Publish ``data`` as the next frame of ``channel``.

    ``data`` is text (sent as UTF-8) or bytes of up to ``MAX_FRAME``. Returns the
    frame's event id, or ``False`` when the channel refused the frame (a name
    that is empty or begins with a control character, or data over ``MAX_FRAME``).
    Raises ``NotServing`` where no server is reachable, ``TypeError`` for data of
    another type.
    """
    if not isinstance(channel, str):
        raise TypeError(f"m0pub.publish: the channel is a str, not {type(channel).__name__}")
    if isinstance(data, str):
        payload = data.encode("utf-8")
    elif isinstance(data, bytes):
        payload = data
    elif isinstance(data, (bytearray, memoryview)):
        payload = bytes(data)
    else:
        raise TypeError(f"m0pub.publish: data is str or bytes, not {type(data).__name__}")
    result = _publisher()(channel, payload)
    if result is None:
        raise NotServing(
            "m0serve serves this application without realtime channels: start it with --realtime "
            "(or, in a Go program, call m0.PublishTo with the hub)"
        )
    if result is False:
        return False
    return str(result)
