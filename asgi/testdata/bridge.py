"""The ASGI application the asgi package's Go tests serve: one raw ASGI
callable with a route per behaviour under test."""

import asyncio
import gc
import json
import os
import time
import tracemalloc

tracemalloc.start()

import weakref

events = []  # what the application saw, for /events
held = []  # weak references to tasks that wait on nothing else, for /held
releases = []  # weak references to what they wait on
state_seen = {}
leftovers = set()  # tasks an application left running after it returned


def _jsonable(v):
    if isinstance(v, bytes):
        return v.decode("latin-1")
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    return v


async def respond(send, status, body, headers=((b"content-type", b"text/plain"),)):
    await send({"type": "http.response.start", "status": status, "headers": list(headers)})
    await send({"type": "http.response.body", "body": body})


async def lifespan(receive, send, state):
    while True:
        m = await receive()
        if m["type"] == "lifespan.startup":
            state["greeting"] = "hello from startup"
            await send({"type": "lifespan.startup.complete"})
        else:
            events.append("lifespan.shutdown")
            await send({"type": "lifespan.shutdown.complete"})
            return


async def websocket(scope, receive, send):
    m = await receive()
    assert m["type"] == "websocket.connect"
    path = scope["path"]
    if path == "/ws/reject":
        await send({"type": "websocket.close", "code": 1008})
        m = await receive()  # after a refusal: the client is gone
        events.append("ws.refused:" + m["type"])
        return
    if path == "/ws/sendonly":
        # Sends and never receives: it learns of the peer leaving when a
        # send raises.
        await send({"type": "websocket.accept"})
        try:
            for i in range(3000):
                await send({"type": "websocket.send", "text": "tick %d" % i})
                await asyncio.sleep(0.005)
        except OSError:
            events.append("sendonly:oserror")
            return
        events.append("sendonly:never-told")
        return
    if path == "/ws/wait-for":
        # The heartbeat shape: receive() under a timeout that often fires.
        await send({"type": "websocket.accept"})
        while True:
            try:
                m = await asyncio.wait_for(receive(), 0.001)
            except asyncio.TimeoutError:
                await asyncio.sleep(0.002)
                continue
            if m["type"] == "websocket.disconnect":
                return
            await send({"type": "websocket.send", "text": "got:" + m["text"]})
    if path == "/ws/raise":
        raise RuntimeError("refused by raising")
    if path == "/ws/lingering":
        # A task the application leaves waiting in receive() when it
        # returns: it hears the disconnect, as under uvicorn, and so does a
        # receive() after the end.
        await send({"type": "websocket.accept"})

        async def lingering():
            m = await receive()
            events.append("ws-lingering:%s:%s" % (m["type"], m.get("code")))
            m = await receive()
            events.append("ws-lingering-again:" + m["type"])

        task = asyncio.get_running_loop().create_task(lingering())
        leftovers.add(task)
        task.add_done_callback(leftovers.discard)
        await asyncio.sleep(0)  # it waits now
        await send({"type": "websocket.send", "text": "bye"})
        return
    if path == "/ws/two-readers":
        # Two receive() loops at once on a long stream of frames: the one
        # that loses each race waits again (no deeper each time).
        await send({"type": "websocket.accept"})
        got = [0, 0]

        async def reader(i):
            while True:
                m = await receive()
                if m["type"] == "websocket.disconnect":
                    return
                got[i] += 1
                if m.get("text") == "done":
                    await send({"type": "websocket.send", "text": str(sum(got))})

        await asyncio.gather(reader(0), reader(1))
        events.append("two-readers:%d" % sum(got))
        return
    if path == "/ws/slow-cleanup":
        # A Django Channels consumer's shape: its disconnect handling awaits
        # (group_discard) before it is done.
        await send({"type": "websocket.accept"})
        while True:
            m = await receive()
            if m["type"] == "websocket.disconnect":
                await asyncio.sleep(0.3)
                events.append("slow-cleanup:%d" % m["code"])
                return
    if path == "/ws/deny":
        # The WebSocket Denial Response extension: a response of its own.
        assert scope["extensions"] == {"websocket.http.response": {}}
        await send({"type": "websocket.http.response.start", "status": 401,
                    "headers": [(b"content-type", b"text/plain"), (b"www-authenticate", b"Bearer")]})
        await send({"type": "websocket.http.response.body", "body": b"a token, ", "more_body": True})
        await send({"type": "websocket.http.response.body", "body": b"please\n"})
        return
    if path == "/ws/deny-twice":
        await send({"type": "websocket.http.response.start", "status": 401})
        try:
            await send({"type": "websocket.accept"})
        except RuntimeError as e:
            events.append("deny-twice:" + str(e))
        await send({"type": "websocket.http.response.body", "body": b"no\n"})
        return
    sub = scope["subprotocols"][0] if scope["subprotocols"] else None
    await send({"type": "websocket.accept", "subprotocol": sub, "headers": [(b"x-accepted", b"yes")]})
    while True:
        m = await receive()
        if m["type"] == "websocket.disconnect":
            events.append("ws.disconnect:%d" % m["code"])
            return
        text, data = m.get("text"), m.get("bytes")
        if text == "close-me":
            await send({"type": "websocket.close", "code": 4001, "reason": "asked"})
            return
        if text is not None:
            await send({"type": "websocket.send", "text": "echo:" + text})
        else:
            await send({"type": "websocket.send", "bytes": data[::-1]})


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        return await lifespan(receive, send, scope["state"])
    if scope["type"] == "websocket":
        return await websocket(scope, receive, send)
    path = scope["path"]
    # Routed as a framework routes: the path below the mount's root_path.
    if scope["root_path"] and path.startswith(scope["root_path"]):
        path = path[len(scope["root_path"]):]
    if path == "/scope":
        s = {k: v for k, v in scope.items()}
        return await respond(send, 200, json.dumps(_jsonable(s)).encode(), [(b"content-type", b"application/json")])
    if path == "/echo":
        chunks = []
        while True:
            m = await receive()
            chunks.append(m["body"])
            if not m.get("more_body"):
                break
        body = b"".join(chunks)
        return await respond(send, 200, body, [(b"x-chunks", str(len(chunks)).encode())])
    if path == "/wait-for":
        # Reads the body through receive() calls that time out and are
        # cancelled, as asyncio.wait_for does: no chunk may be lost.
        n = 0
        while True:
            try:
                m = await asyncio.wait_for(receive(), 0.0001)
            except asyncio.TimeoutError:
                await asyncio.sleep(0.001)
                continue
            n += len(m.get("body", b""))
            if not m.get("more_body"):
                break
        return await respond(send, 200, str(n).encode())
    if path == "/duplex":
        # Echoes each chunk as it arrives, before the body ends.
        await send({"type": "http.response.start", "status": 200, "headers": []})
        while True:
            m = await receive()
            if m["type"] == "http.disconnect":
                events.append("duplex:disconnect")
                return
            await send({"type": "http.response.body", "body": m["body"], "more_body": True})
            if not m.get("more_body"):
                break
        await send({"type": "http.response.body", "body": b""})
        return
    if path == "/count-body":
        # Reads the body slowly; says whether it came whole.
        n = 0
        while True:
            m = await receive()
            if m["type"] == "http.disconnect":
                events.append("count-body:disconnect after %d" % n)
                return
            n += len(m["body"])
            await asyncio.sleep(0.05)
            if not m.get("more_body"):
                break
        events.append("count-body:%d" % n)
        return await respond(send, 200, str(n).encode())
    if path == "/sized":
        # ?body=N bytes, with Content-Length: ?named when given, in two
        # messages with ?stream=1; the same answer to a HEAD.
        q = dict(p.split("=") for p in scope["query_string"].decode().split("&") if p)
        headers = [(b"content-length", q["named"].encode())] if "named" in q else []
        body = b"x" * int(q.get("body", 0))
        if q.get("stream"):
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body[:1], "more_body": True})
            await send({"type": "http.response.body", "body": body[1:]})
            return
        return await respond(send, 200, body, headers)
    if path == "/pattern":
        # ?n parts, part i of (i * 7919 + k * 104729) % 100000 + 1 bytes of
        # (i + k) % 251, k from ?k: sizes that wrap the executor's rings, fill
        # them and go past a quarter of them.
        q = dict(p.split("=") for p in scope["query_string"].decode().split("&") if p)
        n, k = int(q["n"]), int(q.get("k", 0))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for i in range(n):
            size = (i * 7919 + k * 104729) % 100000 + 1
            await send({"type": "http.response.body", "body": bytes([(i + k) % 251]) * size, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return
    if path == "/head-length":
        body = b"" if scope["method"] == "HEAD" else b"x" * 1234
        return await respond(send, 200, body, [(b"content-length", b"1234")])
    if path == "/held":
        # Waits on a future only its own frame holds, until /held-release.
        held.append(weakref.ref(asyncio.current_task()))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"first\n", "more_body": True})
        release = asyncio.get_running_loop().create_future()
        releases.append(weakref.ref(release))
        await release
        return
    if path == "/held-release":
        for r in releases:
            if r() is not None and not r().done():
                r().set_result(None)
        return await respond(send, 200, b"released")
    if path == "/held-alive":
        gc.collect()
        return await respond(send, 200, str(sum(1 for r in held if r() is not None)).encode())
    if path == "/stream":
        n = int(scope["query_string"] or b"3")
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        for i in range(n):
            await send({"type": "http.response.body", "body": b"part%d\n" % i, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return
    if path == "/page":
        # A whole page: 3,000 bytes of text, or as many as the query string says.
        n = int(scope["query_string"] or b"3000")
        return await respond(send, 200, b"<p>" + b"x" * n + b"</p>\n", [(b"content-type", b"text/html")])
    if path == "/big":
        chunk = b"x" * 65536
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for _ in range(160):  # 10 MiB
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return
    if path == "/forever":
        # Streams until the client leaves or the server drains.
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"first\n", "more_body": True})
        while True:
            m = await receive()
            if m["type"] == "http.disconnect":
                events.append("forever:" + m["type"])
                return
    if path == "/long-poll":
        # Computes before its head, listening for the client meanwhile.
        m = await receive()
        assert m["type"] == "http.request"
        m = await receive()
        events.append("long-poll:" + m["type"])
        return
    if path == "/two-receivers":
        # sse-starlette's shape: the stream and a disconnect listener, both
        # in receive() at once.
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"first\n", "more_body": True})
        got = await asyncio.gather(receive(), receive())
        events.append("two-receivers:" + ",".join(m["type"] for m in got))
        return
    if path == "/lingering":
        # A task that outlives its request and then calls receive().
        async def lingering():
            await asyncio.sleep(0.05)
            m = await receive()
            if not scope["query_string"]:
                events.append("lingering:" + m["type"])

        task = asyncio.get_running_loop().create_task(lingering())
        leftovers.add(task)
        task.add_done_callback(leftovers.discard)
        await respond(send, 200, b"ok")
        return
    if path == "/sleep":
        await asyncio.sleep(float(scope["query_string"] or b"0.01"))
        return await respond(send, 200, b"slept")
    if path == "/spin":
        # Busy on the loop's thread for that long: its CPU time.
        end = time.thread_time() + float(scope["query_string"] or b"0.01")
        while time.thread_time() < end:
            pass
        return await respond(send, 200, b"spun")
    if path == "/stop-loop":
        # Stops the event loop under every request in it: a loop that dies.
        asyncio.get_running_loop().stop()
        return await asyncio.sleep(3600)
    if path == "/raise":
        raise ValueError("raised before the response")
    if path == "/raise-late":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"partial", "more_body": True})
        raise ValueError("raised after the response started")
    if path == "/silent":
        return
    if path == "/order":
        await send({"type": "http.response.body", "body": b"too soon"})
        return
    if path == "/bad-header":
        return await respond(send, 200, b"", [(b"x-bad", b"a\r\nb")])
    if path == "/pathsend":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.pathsend", "path": os.environ["M0_TEST_FILE"]})
        return
    if path == "/state":
        return await respond(send, 200, scope["state"].get("greeting", "").encode())
    if path == "/events":
        return await respond(send, 200, json.dumps(events).encode())
    if path == "/mem":
        # The tasks /lingering leaves behind hold their request's memory
        # until they end, 50 ms on: wait for them, so the figure counts
        # only what stays.
        for _ in range(200):
            if not leftovers:
                break
            await asyncio.sleep(0.01)
        gc.collect()
        return await respond(send, 200, str(tracemalloc.get_traced_memory()[0]).encode())
    return await respond(send, 200, b"hello")
