"""Signed stream URLs for ``m0serve --mount PREFIX=hold``.

A view renders ``grant.stream_url(PREFIX, channel, session=...)`` into an
``EventSource``; the server verifies the signature in Go and holds the
stream without calling the application again. The key is the server's
``M0_GRANT_KEY`` (32 bytes or more), shared with the application.

The format, for signing from another language: the query carries ``ch``
(the channel), ``exp`` (Unix seconds), ``ses`` (``1`` when bound to the
session cookie, else ``0``) and ``sig``, the HMAC-SHA256 of the message in
base64url without padding. The message is the fields ``m0-grant-1``, the
prefix, the channel, ``exp``, ``ses`` and the session cookie's value (or the
empty string when not bound), each written as its length in bytes, a colon,
the bytes (UTF-8) and a comma.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import time
from typing import Optional, Union
from urllib.parse import urlencode

__all__ = ["stream_url", "GrantError", "NoGrantKey", "MIN_KEY", "DEFAULT_TTL"]

#: The shortest key the server takes, in bytes.
MIN_KEY = 32
#: The longest channel name, in bytes.
MAX_CHANNEL = 1024
#: How long a grant lasts, in seconds, unless ``ttl`` says otherwise.
DEFAULT_TTL = 60

Key = Union[str, bytes]


class GrantError(ValueError):
    """A grant that cannot be signed: no key, or an argument it refuses."""


class NoGrantKey(GrantError, RuntimeError):
    """No signing key: M0_GRANT_KEY is unset or too short."""


def _field(b: bytes) -> bytes:
    return str(len(b)).encode() + b":" + b + b","


def _message(prefix: str, channel: str, exp: int, session: Optional[bytes]) -> bytes:
    msg = _field(b"m0-grant-1") + _field(prefix.encode()) + _field(channel.encode()) + _field(str(exp).encode())
    if session is None:
        return msg + _field(b"0") + _field(b"")
    return msg + _field(b"1") + _field(session)


def _key(key: Optional[Key]) -> bytes:
    if key is None:
        key = os.environ.get("M0_GRANT_KEY", "")
    k = key.encode() if isinstance(key, str) else bytes(key)
    if len(k) < MIN_KEY:
        raise NoGrantKey(
            f"grant.stream_url needs a key of {MIN_KEY} bytes or more, the server's M0_GRANT_KEY "
            f"(this one has {len(k)}); set it in the environment m0serve starts in, e.g. "
            "M0_GRANT_KEY=$(python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    return k


def stream_url(
    prefix: str,
    channel: str,
    *,
    session: Union[str, bytes, None] = None,
    ttl: float = DEFAULT_TTL,
    key: Optional[Key] = None,
    now: Optional[float] = None,
) -> str:
    """The URL of a held stream of ``channel`` under the hold mount ``prefix``.

    ``session`` is the value of the session cookie (``M0_GRANT_COOKIE``,
    ``sessionid`` by default) as the browser sends it, ``str`` or ``bytes``:
    the grant then serves that session only (an empty value is signed, as
    the other implementation signs it, but no request can use the grant: the
    server refuses a bound grant without a session cookie). ``None`` makes a grant anyone holding the URL may
    use. The grant expires ``ttl`` seconds from now (a reconnect after that is
    refused, so make it longer than a page stays open, or sign again; zero or
    less signs one already expired). ``key`` defaults to ``M0_GRANT_KEY``.
    Raises ``GrantError`` (a ``ValueError``) for an argument it refuses,
    ``NoGrantKey`` (one too) without a key.
    """
    if not isinstance(prefix, str) or not prefix.startswith("/"):
        raise GrantError(f"grant.stream_url: the prefix is the mount's path, starting with /, not {prefix!r}")
    if (
        not isinstance(channel, str)
        or not channel
        or ord(channel[0]) < 0x20
        or channel[0] == "\x7f"
        or len(channel.encode()) > MAX_CHANNEL
    ):
        raise GrantError(f"grant.stream_url: {channel!r} is not a channel name")
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)):
        raise GrantError(f"grant.stream_url: ttl is a number of seconds, not {ttl!r}")
    if isinstance(session, str):
        bound: Optional[bytes] = session.encode()
    elif isinstance(session, (bytes, bytearray)):
        bound = bytes(session)
    elif session is None:
        bound = None
    else:
        raise TypeError(f"grant.stream_url: session is the cookie's value (str or bytes), not {type(session).__name__}")
    exp = int((time.time() if now is None else now) + ttl)
    sig = hmac.new(_key(key), _message(prefix, channel, exp, bound), hashlib.sha256).digest()
    query = urlencode(
        [
            ("ch", channel),
            ("exp", str(exp)),
            ("ses", "0" if session is None else "1"),
            ("sig", base64.urlsafe_b64encode(sig).rstrip(b"=").decode()),
        ]
    )
    return f"{prefix}?{query}"
