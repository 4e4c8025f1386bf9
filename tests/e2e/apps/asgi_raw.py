"""Raw ASGI 3.0 applications for probing the server's ASGI bridge.

No framework: each message the server hands over, and each one sent back,
is visible here. Module-level callables, one per server:

  application         HTTP and WebSocket routes below, and a lifespan that
                      puts {"greeting": ..., "started_at": ...} in the state
                      and, on shutdown, records how many HTTP requests are
                      still in the app under "lifespan" and writes
                      "shutdown complete" to $M0_TEST_SHUTDOWN_FILE (when set)
  app_object          an instance whose async __call__ is `application`
  sync_call_object    an instance whose plain __call__ returns a coroutine:
                      detected as WSGI, ASGI only with --protocol asgi
  no_lifespan         raises on the lifespan scope (served anyway)
  lifespan_failed     answers lifespan.startup.failed "database unreachable"
  slow_startup        startup touches $M0_TEST_STARTUP_MARK, then sleeps 60 s
  shutdown_failed     answers lifespan.shutdown.failed "could not flush the cache"
  shutdown_hangs      the shutdown never answers (sleeps 120 s)

Where something is "recorded under X", it goes to EVENTS (GET /events?id=X)
and, when $M0_TEST_EVENTS_DIR is set, as a JSON line to the file X there
(readable after the server has exited).

HTTP routes of `application`:
  /scope[/anything]           JSON: the scope (bytes as latin-1 text)
  /state                      JSON: scope["state"]; then mutates its copy
  /echo[?id=X]                the request body, back; X-Chunks: receive()
                              count; records "echo ran" under X
  /chunks                     JSON: [[len(body), more_body], ...] per receive()
  /stream?n=K&delay=S         K chunks "chunk i\\n", more_body, no length
  /big?size=N                 N bytes in one message, with Content-Length
  /big-stream?size=N[&id=X]   N bytes in 64 KiB more_body messages; then
                              records "sent it all" under X
  /forever?id=X               streams "tick i\\n" until http.disconnect, which
                              it records under X (see /events)
  /after-response?id=X        answers, then records the receive() after that
  /spin?s=S                   keeps the loop's thread busy S seconds, then
                              "spun\\n"
  /sleep?s=S[&id=X]           sleeps S seconds, then "slept\\n"; records
                              "sleeping" under X first
  /length?cl=N&parts=A,B[&delay=S][&close=1]
                              Content-Length N (as the app names it, right or
                              wrong), then the parts, one body message each
  /gated-stream?key=K[&cl=N]  "first part\\n", then nothing until /gate?key=K
                              (or 10 s), then "second part\\n"; with cl, the
                              app names that Content-Length
  /gate?key=K                 opens that gate
  /events?id=X                JSON: what was recorded under X
  /loop                       the module of the running event loop's type
  /barrier?key=K&n=N          answers once N requests with key K are all in
                              the application at once (504 after 10 s)
  /headers-out                repeated response headers, a custom reason
  /status?code=N              an empty response with that status
  /head                       Content-Length 11, body "hello world"
  /pathsend?path=P            http.response.pathsend with P
  /error/before-start         raises before http.response.start
  /error/after-start          start sent, then raises
  /error/mid-stream           one streamed chunk, then raises
  /error/no-response          returns without sending anything
  /error/body-before-start    http.response.body first
  /error/incomplete           start + a more_body chunk, then returns
  /error/bad-header           a header value with a newline
  /error/double-start         http.response.start twice
  /error/send-after-complete  a body message after the last one (after the
                              response went out); records the error under id

WebSocket routes of `application`:
  /ws/echo?id=X[&delay=S]
                      accepts (the first offered subprotocol, X-WS: yes);
                      (sleeps S before each echo)
                      echoes text as text, bytes as bytes; text
                      "close CODE REASON" closes with that; the disconnect
                      code and reason are recorded under X
  /ws/scope           accepts, sends the scope as JSON text, closes 1000
  /ws/deny            websocket.close before accepting (HTTP 403)
  /ws/raise-before    raises before accepting
  /ws/raise-after     accepts, then raises (close 1011)
  /ws/return          accepts, then returns (close 1000)
  /ws/flood?n=N&id=X  accepts, sends N 64 KiB binary messages as fast as
                      send() returns, records "sent all" under X, then the
                      type of the next receive()
  /ws/hold?id=X       accepts, records the websocket.disconnect code under X
  /ws/send-after-disconnect?id=X
                      accepts, waits for websocket.disconnect, then sends:
                      records what that send raised under X
"""

import asyncio
import json
import os
import time
from urllib.parse import parse_qs

EVENTS = {}  # id -> list of recorded things


def record(key, what):
    EVENTS.setdefault(key, []).append(what)
    events_dir = os.environ.get("M0_TEST_EVENTS_DIR")
    if events_dir:
        with open(os.path.join(events_dir, key), "a") as f:
            f.write(json.dumps(what) + "\n")


def query(scope):
    return {k: v[-1] for k, v in parse_qs(scope["query_string"].decode("latin-1")).items()}


def pattern(n):
    """n bytes: 0, 1, ..., 250, 0, 1, ... (the tests rebuild them)."""
    return (bytes(range(251)) * (n // 251 + 1))[:n]


def plain(value):
    """The scope as JSON can carry it: bytes as latin-1 text, tuples as lists."""
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


def scope_facts(scope):
    facts = plain(scope)
    facts["_types"] = {
        "raw_path": type(scope.get("raw_path")).__name__,
        "query_string": type(scope.get("query_string")).__name__,
        "headers": type(scope.get("headers")).__name__,
        "header_item": sorted({type(h).__name__ for h in scope.get("headers", [])}),
        "header_parts": sorted({type(p).__name__ for h in scope.get("headers", []) for p in h}),
        "client": type(scope.get("client")).__name__,
        "server": type(scope.get("server")).__name__,
    }
    return facts


async def respond(send, body, status=200, ctype=b"text/plain; charset=utf-8", headers=()):
    if isinstance(body, str):
        body = body.encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", ctype), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})


async def respond_json(send, obj, status=200):
    await respond(send, json.dumps(obj), status, b"application/json")


async def read_body(receive):
    """The whole request body and the [len, more_body] of each message."""
    parts, chunks = [], []
    while True:
        message = await receive()
        assert message["type"] == "http.request", message
        parts.append(message.get("body", b""))
        chunks.append([len(message.get("body", b"")), message.get("more_body", False)])
        if not message.get("more_body", False):
            return b"".join(parts), chunks


async def stream_start(send, ctype=b"text/plain; charset=utf-8"):
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", ctype)]})


# --------------------------------------------------------------------------
# HTTP


async def http(scope, receive, send):
    path = scope["path"]
    q = query(scope)

    if path.startswith("/scope"):
        await respond_json(send, scope_facts(scope))
    elif path == "/state":
        before = plain(scope["state"])
        scope["state"]["mutated_by_request"] = True  # a copy: the next request does not see it
        await respond_json(send, before)
    elif path == "/echo":
        if "id" in q:
            record(q["id"], "echo ran")
        body, chunks = await read_body(receive)
        await respond(send, body, ctype=b"application/octet-stream",
                      headers=[(b"x-chunks", str(len(chunks)).encode())])
    elif path == "/chunks":
        _, chunks = await read_body(receive)
        await respond_json(send, chunks)
    elif path == "/stream":
        n, delay = int(q.get("n", 3)), float(q.get("delay", 0))
        await stream_start(send)
        for i in range(n):
            if i and delay:
                await asyncio.sleep(delay)
            await send({"type": "http.response.body", "body": b"chunk %d\n" % i, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    elif path == "/big":
        size = int(q["size"])
        await respond(send, pattern(size), ctype=b"application/octet-stream")
    elif path == "/big-stream":
        size = int(q["size"])
        data = pattern(size)
        await stream_start(send, b"application/octet-stream")
        for at in range(0, size, 65536):
            await send({"type": "http.response.body", "body": data[at:at + 65536], "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        if "id" in q:
            record(q["id"], "sent it all")
    elif path == "/forever":
        await forever(q["id"], receive, send)
    elif path == "/after-response":
        await read_body(receive)
        await respond(send, "answered\n")
        message = await asyncio.wait_for(receive(), 10)
        record(q["id"], message["type"])
    elif path == "/block-after-response":
        # A background job written wrong: a blocking call in the task after
        # the answer, holding the loop.
        await respond(send, "answered before the block\n")
        time.sleep(float(q["s"]))
    elif path == "/spin":
        end = time.monotonic() + float(q["s"])
        while time.monotonic() < end:  # busy on the loop's thread
            pass
        await respond(send, "spun\n")
    elif path == "/sleep":
        if "id" in q:
            record(q["id"], "sleeping")
        await asyncio.sleep(float(q["s"]))
        await respond(send, "slept\n")
    elif path == "/length":
        # Content-Length as the app declares it, and the body in parts.
        parts = [p.encode() for p in q.get("parts", "").split(",")]
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain"), (b"content-length", q["cl"].encode()),
                                *([(b"connection", b"close")] if "close" in q else [])]})
        for i, part in enumerate(parts):
            if i and "delay" in q:
                await asyncio.sleep(float(q["delay"]))
            await send({"type": "http.response.body", "body": part, "more_body": i < len(parts) - 1})
    elif path == "/gated-stream":
        # The first part, then nothing until /gate opens (or 10 s pass).
        headers = [(b"content-type", b"text/plain")]
        if "cl" in q:
            headers.append((b"content-length", q["cl"].encode()))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"first part\n", "more_body": True})
        gate = GATES.setdefault(q["key"], asyncio.Event())
        try:
            await asyncio.wait_for(gate.wait(), 10)
        except asyncio.TimeoutError:
            pass
        await send({"type": "http.response.body", "body": b"second part\n"})
    elif path == "/gate":
        GATES.setdefault(q["key"], asyncio.Event()).set()
        await respond(send, "opened\n")
    elif path == "/loop":
        await respond(send, type(asyncio.get_running_loop()).__module__)
    elif path == "/barrier":
        await barrier(q["key"], int(q["n"]), send)
    elif path == "/events":
        await respond_json(send, EVENTS.get(q["id"], []))
    elif path == "/headers-out":
        body = b"two cookies\n"
        await send({"type": "http.response.start", "status": 201, "headers": [
            (b"Content-Type", b"text/plain"),
            (b"set-cookie", b"a=1; Path=/"),
            (b"set-cookie", b"b=2; Path=/"),
            (b"x-custom", b"custom value"),
            (b"content-length", str(len(body)).encode()),
        ]})
        await send({"type": "http.response.body", "body": body})
    elif path == "/status":
        await send({"type": "http.response.start", "status": int(q["code"]), "headers": []})
        await send({"type": "http.response.body", "body": b""})
    elif path == "/head":
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain"), (b"content-length", b"11")]})
        await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else b"hello world"})
    elif path == "/pathsend":
        assert "http.response.pathsend" in scope.get("extensions", {}), scope.get("extensions")
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/octet-stream"), (b"x-sent-by", b"pathsend")]})
        await send({"type": "http.response.pathsend", "path": q["path"]})
    elif path.startswith("/error/"):
        await errors(path[len("/error/"):], q, receive, send)
    else:
        await respond(send, f"no route {path}\n", status=404)


async def forever(key, receive, send):
    """Streams until the client is gone (http.disconnect), then records it."""
    gone = asyncio.Event()

    async def listen():
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                record(key, "http.disconnect")
                gone.set()
                return

    listener = asyncio.ensure_future(listen())
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream")]})
    i = 0
    try:
        while not gone.is_set():
            await send({"type": "http.response.body", "body": b"tick %d\n" % i, "more_body": True})
            i += 1
            try:
                await asyncio.wait_for(gone.wait(), 0.1)
            except asyncio.TimeoutError:
                pass
    finally:
        listener.cancel()
    record(key, "stream ended")


BARRIERS = {}  # key -> how many have arrived
GATES = {}  # key -> asyncio.Event


async def barrier(key, n, send):
    """Answers once n requests with this key are all in the application at
    once (each waits for the others), or 504 after 10 s. It polls, so it
    also works across threads with a loop each (the buffered path)."""
    BARRIERS[key] = BARRIERS.get(key, 0) + 1
    deadline = time.monotonic() + 10
    while BARRIERS[key] < n:
        if time.monotonic() > deadline:
            await respond(send, f"only {BARRIERS[key]} of {n} arrived\n", status=504)
            return
        await asyncio.sleep(0.01)
    await respond(send, "released\n")


async def errors(kind, q, receive, send):
    if kind == "before-start":
        raise RuntimeError("boom before start")
    if kind == "after-start":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        raise RuntimeError("boom after start")
    if kind == "mid-stream":
        await stream_start(send)
        await send({"type": "http.response.body", "body": b"first chunk\n", "more_body": True})
        await asyncio.sleep(0.05)
        raise RuntimeError("boom mid-stream")
    if kind == "no-response":
        return
    if kind == "body-before-start":
        await send({"type": "http.response.body", "body": b"too early"})
        return
    if kind == "incomplete":
        await stream_start(send)
        await send({"type": "http.response.body", "body": b"partial\n", "more_body": True})
        return
    if kind == "bad-header":
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"x-evil", b"a\r\nx-injected: yes")]})
        await send({"type": "http.response.body", "body": b"should not be sent"})
        return
    if kind == "double-start":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"should not be sent"})
        return
    if kind == "send-after-complete":
        await respond(send, "complete\n")
        try:
            await send({"type": "http.response.body", "body": b"extra"})
        except Exception as exc:  # noqa: BLE001 - recorded for the test
            record(q["id"], type(exc).__name__)
        else:
            record(q["id"], "no error")
        return
    raise LookupError(kind)


# --------------------------------------------------------------------------
# WebSocket


async def websocket(scope, receive, send):
    path = scope["path"]
    q = query(scope)
    message = await receive()
    assert message["type"] == "websocket.connect", message

    if path == "/ws/echo":
        offered = scope.get("subprotocols") or []
        await send({"type": "websocket.accept", "subprotocol": offered[0] if offered else None,
                    "headers": [(b"x-ws", b"yes")]})
        delay = float(q.get("delay", 0))
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                record(q.get("id", "ws"), {"code": message.get("code"), "reason": message.get("reason")})
                return
            if delay:
                await asyncio.sleep(delay)
            text = message.get("text")
            if text is not None:
                if text.startswith("close "):
                    _, code, reason = text.split(" ", 2)
                    await send({"type": "websocket.close", "code": int(code), "reason": reason})
                    return
                await send({"type": "websocket.send", "text": text})
            else:
                await send({"type": "websocket.send", "bytes": message["bytes"]})
    elif path == "/ws/scope":
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "text": json.dumps(scope_facts(scope))})
        await send({"type": "websocket.close", "code": 1000})
    elif path == "/ws/deny":
        await send({"type": "websocket.close", "code": 1008})
    elif path == "/ws/raise-before":
        raise RuntimeError("ws boom before accept")
    elif path == "/ws/raise-after":
        await send({"type": "websocket.accept"})
        raise RuntimeError("ws boom after accept")
    elif path == "/ws/return":
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "text": "bye"})
    elif path == "/ws/send-after-disconnect":
        await send({"type": "websocket.accept"})
        message = await receive()
        assert message["type"] == "websocket.disconnect", message
        try:
            await send({"type": "websocket.send", "text": "anyone there?"})
        except Exception as exc:  # noqa: BLE001 - recorded for the test
            record(q["id"], {"raised": type(exc).__name__, "oserror": isinstance(exc, OSError)})
        else:
            record(q["id"], {"raised": None})
    elif path == "/ws/flood":
        # Sends n 64 KiB messages as fast as send() lets it, then records.
        await send({"type": "websocket.accept"})
        chunk = b"x" * 65536
        for _ in range(int(q["n"])):
            await send({"type": "websocket.send", "bytes": chunk})
        record(q["id"], "sent all")
        message = await receive()
        record(q["id"], message["type"])
    elif path == "/ws/hold":
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "text": "holding"})
        message = await receive()
        record(q["id"], {"type": message["type"], "code": message.get("code")})
    else:
        await send({"type": "websocket.close", "code": 4404})


# --------------------------------------------------------------------------
# lifespan


async def lifespan(scope, receive, send):
    message = await receive()
    assert message["type"] == "lifespan.startup", message
    scope["state"]["greeting"] = "hello from lifespan"
    scope["state"]["started_at"] = time.time()
    await send({"type": "lifespan.startup.complete"})
    message = await receive()
    assert message["type"] == "lifespan.shutdown", message
    record("lifespan", {"shutdown": "began", "http_in_flight": IN_FLIGHT["http"]})
    path = os.environ.get("M0_TEST_SHUTDOWN_FILE")
    if path:
        with open(path, "w") as f:
            f.write("shutdown complete\n")
    await send({"type": "lifespan.shutdown.complete"})


IN_FLIGHT = {"http": 0}


async def application(scope, receive, send):
    kind = scope["type"]
    if kind == "http":
        IN_FLIGHT["http"] += 1
        try:
            await http(scope, receive, send)
        finally:
            IN_FLIGHT["http"] -= 1
    elif kind == "websocket":
        await websocket(scope, receive, send)
    elif kind == "lifespan":
        await lifespan(scope, receive, send)
    else:
        raise ValueError(f"unknown scope type {kind!r}")


class _AppObject:
    async def __call__(self, scope, receive, send):
        await application(scope, receive, send)


app_object = _AppObject()


class _SyncCallObject:
    """Not a coroutine function, so detection calls it WSGI; its __call__
    returns application's coroutine, so it is ASGI all the same."""

    def __call__(self, scope, receive, send):
        return application(scope, receive, send)


sync_call_object = _SyncCallObject()


async def no_lifespan(scope, receive, send):
    if scope["type"] == "lifespan":
        raise RuntimeError("this application does not do lifespan")
    await application(scope, receive, send)


async def lifespan_failed(scope, receive, send):
    if scope["type"] == "lifespan":
        await receive()
        await send({"type": "lifespan.startup.failed", "message": "database unreachable"})
        return
    await application(scope, receive, send)


async def slow_startup(scope, receive, send):
    if scope["type"] == "lifespan":
        await receive()
        with open(os.environ["M0_TEST_STARTUP_MARK"], "w") as f:
            f.write("startup began\n")
        await asyncio.sleep(60)
        await send({"type": "lifespan.startup.complete"})
        return
    await application(scope, receive, send)


async def shutdown_failed(scope, receive, send):
    if scope["type"] == "lifespan":
        await receive()
        await send({"type": "lifespan.startup.complete"})
        await receive()
        await send({"type": "lifespan.shutdown.failed", "message": "could not flush the cache"})
        return
    await application(scope, receive, send)


async def shutdown_hangs(scope, receive, send):
    if scope["type"] == "lifespan":
        await receive()
        await send({"type": "lifespan.startup.complete"})
        await receive()
        await asyncio.sleep(120)
        return
    await application(scope, receive, send)
