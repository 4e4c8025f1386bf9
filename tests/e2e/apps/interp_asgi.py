"""An ASGI application with a lifespan, for the tests of --interpreters on
the buffered path: which interpreter served a request, which one's
startup filled the lifespan state the request sees, and a file per
interpreter from its shutdown."""
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
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                where = os.environ.get("M0_TEST_SHUTDOWN_DIR")
                if where:
                    with open(os.path.join(where, str(id(sys.modules))), "w") as f:
                        f.write("shut down")
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["query_string"]:  # seconds to wait, so that requests overlap
        await asyncio.sleep(float(scope["query_string"]))
    body = json.dumps({"interp": id(sys.modules), "started_in": scope["state"].get("started_in")}).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
