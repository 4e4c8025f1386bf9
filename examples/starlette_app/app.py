"""Starlette example: streaming, Server-Sent Events (sse-starlette), a
WebSocket endpoint, background tasks, a file, and lifespan state.

    m0serve --app-dir examples/starlette_app app:app

Routes:
  GET  /                  JSON hello, with what the lifespan set up
  GET  /stream?n=5        n lines, streamed (no Content-Length)
  GET  /events?count=3    Server-Sent Events "tick" with ids 0..count-1;
                          count=0 streams until the client (or the server) goes
  GET  /sse-polling?count=3  the same events from sse-starlette's documented
                          loop: the generator polls request.is_disconnected()
  GET  /stream-polling?n=3   a StreamingResponse whose generator polls it too
  GET  /quiet             Server-Sent Events: one, then nothing until the
                          client leaves (a channel with nothing to say)
  GET  /left              the streams above that heard their client leave
  GET  /file              static/hello.txt (FileResponse: sent by the server
                          itself, via the ASGI pathsend extension)
  POST /signup            JSON {"email": ...}; a background task "sends" the
                          welcome mail after the response -> 202
  GET  /outbox            the mails the background tasks have sent
  WS   /ws                echoes text back upper-cased; "bye" closes with 1000
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.endpoints import WebSocketEndpoint
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

HERE = Path(__file__).resolve().parent


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
    # Copied (shallowly) into every request's state: `outbox` is shared.
    yield {"greeting": "hello from the lifespan", "outbox": []}


async def index(request: Request) -> JSONResponse:
    return JSONResponse({"hello": "world", "lifespan": request.state.greeting})


async def stream(request: Request) -> StreamingResponse:
    n = int(request.query_params.get("n", "5"))

    async def lines() -> AsyncIterator[bytes]:
        for i in range(n):
            yield f"line {i}\n".encode()
            await asyncio.sleep(0.01)

    return StreamingResponse(lines(), media_type="text/plain")


async def events(request: Request) -> EventSourceResponse:
    count = int(request.query_params.get("count", "3"))

    async def ticks() -> AsyncIterator[dict[str, Any]]:
        i = 0
        while count == 0 or i < count:
            yield {"event": "tick", "id": str(i), "data": f"tick {i}"}
            i += 1
            await asyncio.sleep(0.05)

    # EventSourceResponse ends the generator when the client disconnects,
    # which is also what the server tells a stream when it drains.
    return EventSourceResponse(ticks(), ping=15)


# The streams that heard their client leave, for /left.
LEFT: list[str] = []


async def sse_polling(request: Request) -> EventSourceResponse:
    count = int(request.query_params.get("count", "3"))

    async def ticks() -> AsyncIterator[dict[str, Any]]:
        i = 0
        try:
            while count == 0 or i < count:
                if await request.is_disconnected():
                    return
                yield {"event": "tick", "id": str(i), "data": f"tick {i}"}
                i += 1
                await asyncio.sleep(0.05)
        finally:
            # Ended early: it saw the disconnect, or the response's own
            # listener saw it first and cancelled the generator.
            if count == 0 or i < count:
                LEFT.append("sse-polling")

    return EventSourceResponse(ticks())


async def stream_polling(request: Request) -> StreamingResponse:
    n = int(request.query_params.get("n", "3"))

    async def lines() -> AsyncIterator[bytes]:
        for i in range(n):
            if await request.is_disconnected():
                LEFT.append("stream-polling")
                return
            yield f"line {i}\n".encode()
            await asyncio.sleep(0.01)

    return StreamingResponse(lines(), media_type="text/plain")


async def quiet(request: Request) -> EventSourceResponse:
    async def once() -> AsyncIterator[dict[str, Any]]:
        try:
            yield {"event": "hello", "data": "and then nothing"}
            await asyncio.Event().wait()  # nothing ever comes
        finally:
            LEFT.append("quiet")

    return EventSourceResponse(once(), ping=600)


async def left(request: Request) -> JSONResponse:
    return JSONResponse(LEFT)


async def file(request: Request) -> FileResponse:
    return FileResponse(HERE / "static" / "hello.txt", media_type="text/plain")


async def send_welcome(outbox: list[str], email: str) -> None:
    await asyncio.sleep(0)  # as if talking to a mail server
    outbox.append(f"welcome mail to {email}")


async def signup(request: Request) -> JSONResponse:
    body = await request.json()
    email = str(body.get("email", "")) if isinstance(body, dict) else ""
    if "@" not in email:
        return JSONResponse({"error": "an email address is required"}, status_code=400)
    task = BackgroundTask(send_welcome, request.state.outbox, email)
    return JSONResponse({"signed_up": email}, status_code=202, background=task)


async def outbox(request: Request) -> JSONResponse:
    return JSONResponse(request.state.outbox)


class Echo(WebSocketEndpoint):
    encoding = "text"

    async def on_receive(self, websocket: WebSocket, data: str) -> None:
        if data == "bye":
            await websocket.close(code=1000, reason="bye")
            return
        await websocket.send_text(data.upper())


app = Starlette(
    routes=[
        Route("/", index),
        Route("/stream", stream),
        Route("/events", events),
        Route("/sse-polling", sse_polling),
        Route("/stream-polling", stream_polling),
        Route("/quiet", quiet),
        Route("/left", left),
        Route("/file", file),
        Route("/signup", signup, methods=["POST"]),
        Route("/outbox", outbox),
        WebSocketRoute("/ws", Echo),
    ],
    lifespan=lifespan,
)
