"""Answers of a chosen length, for HEAD: ?body=N bytes of "x", with
Content-Length: ?named when given, in two parts with ?stream=1 (two body
messages, or a generator's two items). A HEAD gets the same answer as a GET: what the server sends of it
is the server's choice. `application` is the WSGI form, `app` the ASGI
one."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl


def _query(qs: str) -> tuple[list[tuple[str, str]], bytes, bool]:
    q = dict(parse_qsl(qs))
    headers = [("Content-Type", "text/plain")]
    if "named" in q:
        headers.append(("Content-Length", q["named"]))
    return headers, b"x" * int(q.get("body", "0")), bool(q.get("stream"))


def application(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    headers, body, stream = _query(environ.get("QUERY_STRING", ""))
    start_response("200 OK", headers)
    if stream:
        return _parts(body)
    return [body]


def _parts(body: bytes) -> Iterable[bytes]:
    yield body[:1]
    yield body[1:]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    headers, body, stream = _query(scope["query_string"].decode("latin-1"))
    await send({"type": "http.response.start", "status": 200,
                "headers": [(k.lower().encode(), v.encode()) for k, v in headers]})
    if stream:
        await send({"type": "http.response.body", "body": body[:1], "more_body": True})
        body = body[1:]
    await send({"type": "http.response.body", "body": body})
