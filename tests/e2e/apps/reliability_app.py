"""The application of the reliability tests (test_reliability.py) and of
the soak (bench/soak): load, slow clients, faults and exhaustion.

`application` (WSGI; with --realtime for /events):
  /hello                 200 "Hello, World!\\n", with a Content-Length
  /pid                   {"pid": os.getpid()}, and the pid in X-Pid
  /tenth                 every tenth call since start raises RuntimeError
                         ("tenth N"), logged and answered 500; others 200
                         "call N\\n"
  /sleep?s=S             sleeps S seconds, then 200 "slept\\n"
  /upload                reads the body; 200 with its length as text
  /big?n=N               N bytes in one list item (gathered, sent with a
                         Content-Length)
  /bytes?n=N[&id=X]      N bytes streamed from a generator in 64 KiB parts,
                         no Content-Length; close() counted under X
  /counts                {"calls": {route: n}, "closed": {X: n}}
  /memory                {"blocks": sys.getallocatedblocks(), "objects": the
                         objects the collector tracks, after a collection}
  /events?c=CH           an SSE hold of channel CH (needs --realtime)
  /publish?c=CH          publishes the body on CH: 200 with the frame's id

`asgi` (ASGI 3.0):
  /hello, /tenth, /sleep?s=S, /upload, /bytes?n=N[&id=X] as above (the
  stream stops at http.disconnect), /counts, and the WebSocket /ws, which echoes every message as it
  came (text as text, bytes as bytes) until the client closes.
"""

import asyncio
import gc
import json
import os
import sys
import threading
import time
from urllib.parse import parse_qs

HELLO = b"Hello, World!\n"
PART = 65536

_lock = threading.Lock()
CALLS = {}
CLOSED = {}


def _count(route):
    with _lock:
        n = CALLS.get(route, 0) + 1
        CALLS[route] = n
    return n


def _query(raw):
    return {k: v[0] for k, v in parse_qs(raw).items()}


def _respond(start_response, body, status="200 OK", ctype="text/plain; charset=utf-8"):
    start_response(status, [("Content-Type", ctype), ("Content-Length", str(len(body)))])
    return [body]


class Parts:
    """n bytes in 64 KiB parts; close() counted under an id."""

    def __init__(self, n, stream_id):
        self.left = n
        self.id = stream_id
        self.part = b"b" * PART

    def __iter__(self):
        while self.left > 0:
            k = min(PART, self.left)
            self.left -= k
            yield self.part if k == PART else self.part[:k]

    def close(self):
        with _lock:
            CLOSED[self.id] = CLOSED.get(self.id, 0) + 1


def _memory():
    gc.collect()
    return json.dumps({"blocks": sys.getallocatedblocks(), "objects": len(gc.get_objects())}).encode()


def application(environ, start_response):
    path = environ["PATH_INFO"]
    q = _query(environ.get("QUERY_STRING", ""))
    if path == "/hello":
        _count(path)
        return _respond(start_response, HELLO)
    if path == "/pid":
        pid = os.getpid()
        start_response("200 OK", [("Content-Type", "application/json"), ("X-Pid", str(pid))])
        return [json.dumps({"pid": pid}).encode()]
    if path == "/tenth":
        n = _count(path)
        if n % 10 == 0:
            raise RuntimeError(f"tenth {n}")
        return _respond(start_response, f"call {n}\n".encode())
    if path == "/sleep":
        _count(path)
        time.sleep(float(q.get("s", "1")))
        return _respond(start_response, b"slept\n")
    if path == "/upload":
        _count(path)
        body = environ["wsgi.input"].read()
        return _respond(start_response, str(len(body)).encode())
    if path == "/big":
        _count(path)
        return _respond(start_response, b"g" * int(q.get("n", "0")), ctype="application/octet-stream")
    if path == "/bytes":
        _count(path)
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        return Parts(int(q.get("n", "0")), q.get("id", ""))
    if path == "/counts":
        with _lock:
            body = json.dumps({"calls": CALLS, "closed": CLOSED}).encode()
        return _respond(start_response, body, ctype="application/json")
    if path == "/memory":
        return _respond(start_response, _memory(), ctype="application/json")
    if path == "/events":
        start_response("200 OK", [("M0-Hold", "stream"), ("M0-Channel", q.get("c", "soak"))])
        return [b""]
    if path == "/publish":
        from m0serve import m0pub

        body = environ["wsgi.input"].read()
        fid = m0pub.publish(q.get("c", "soak"), body)
        return _respond(start_response, str(fid).encode())
    return _respond(start_response, b"not found\n", "404 Not Found")


async def _send_body(send, body, status=200, ctype=b"text/plain; charset=utf-8"):
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", ctype), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def _http(scope, receive, send):
    path = scope["path"]
    q = _query(scope.get("query_string", b"").decode("latin-1"))
    if path == "/hello":
        _count(path)
        return await _send_body(send, HELLO)
    if path == "/tenth":
        n = _count(path)
        if n % 10 == 0:
            raise RuntimeError(f"tenth {n}")
        return await _send_body(send, f"call {n}\n".encode())
    if path == "/sleep":
        _count(path)
        await asyncio.sleep(float(q.get("s", "1")))
        return await _send_body(send, b"slept\n")
    if path == "/upload":
        _count(path)
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            size += len(message.get("body", b""))
            if not message.get("more_body"):
                break
        return await _send_body(send, str(size).encode())
    if path == "/bytes":
        # As Starlette's StreamingResponse: the stream stops when the
        # client leaves (http.disconnect), and its end is counted.
        _count(path)
        left = int(q.get("n", "0"))
        part = b"b" * PART
        gone = asyncio.Event()

        async def listen():
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()

        listener = asyncio.ensure_future(listen())
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/octet-stream")]})
        try:
            while left > 0 and not gone.is_set():
                k = min(PART, left)
                left -= k
                await send({"type": "http.response.body", "body": part[:k], "more_body": True})
            if not gone.is_set():
                await send({"type": "http.response.body", "body": b""})
        finally:
            listener.cancel()
            with _lock:
                CLOSED[q.get("id", "")] = CLOSED.get(q.get("id", ""), 0) + 1
        return
    if path == "/counts":
        with _lock:
            body = json.dumps({"calls": CALLS, "closed": CLOSED}).encode()
        return await _send_body(send, body, ctype=b"application/json")
    if path == "/memory":
        return await _send_body(send, _memory(), ctype=b"application/json")
    return await _send_body(send, b"not found\n", status=404)


async def _websocket(scope, receive, send):
    message = await receive()
    if message["type"] != "websocket.connect":
        return
    await send({"type": "websocket.accept"})
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            return
        if message.get("text") is not None:
            await send({"type": "websocket.send", "text": message["text"]})
        else:
            await send({"type": "websocket.send", "bytes": message.get("bytes") or b""})


async def asgi(scope, receive, send):
    if scope["type"] == "http":
        await _http(scope, receive, send)
    elif scope["type"] == "websocket":
        await _websocket(scope, receive, send)
    elif scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
