"""An ASGI application with a lifespan, for the tests of --interpreters:
which interpreter served a request, which one's startup filled the
lifespan state the request sees, and a file per interpreter from its
shutdown. On the executor, /stream answers in three parts, each naming
the interpreter, and a WebSocket echoes each message with the
interpreter's name after it. With M0_TEST_FAIL_ONE set to a path, the
startup of the one interpreter that makes that file first fails."""
import asyncio
import json
import os
import sys


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                scope["state"]["started_in"] = id(sys.modules)
                one = os.environ.get("M0_TEST_FAIL_ONE")
                if one:
                    try:
                        os.close(os.open(one, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                    except FileExistsError:
                        pass
                    else:
                        await send({"type": "lifespan.startup.failed", "message": f"failed in {id(sys.modules)}"})
                        return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                where = os.environ.get("M0_TEST_SHUTDOWN_DIR")
                if where:
                    with open(os.path.join(where, str(id(sys.modules))), "w") as f:
                        f.write("shut down")
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] == "websocket":
        await receive()  # websocket.connect
        await send({"type": "websocket.accept"})
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                return
            await send({"type": "websocket.send", "text": f"{message['text']} {id(sys.modules)}"})
    if scope["path"] == "/stream":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        for i in range(3):
            await asyncio.sleep(0.01)
            await send({"type": "http.response.body", "body": f"{i} {id(sys.modules)}\n".encode(), "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return
    if scope["query_string"]:  # seconds to wait, so that requests overlap
        await asyncio.sleep(float(scope["query_string"]))
    body = json.dumps({"interp": id(sys.modules), "started_in": scope["state"].get("started_in")}).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
