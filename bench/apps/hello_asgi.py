"""Raw ASGI hello world for bench/run asgi: the server's own cost.

GET / answers 200 text/plain "Hello, World!" with a Content-Length. The
lifespan protocol is accepted (startup and shutdown complete at once), so
every server runs it the same way.
"""

BODY = b"Hello, World!"
HEADERS = [
    (b"content-type", b"text/plain"),
    (b"content-length", str(len(BODY)).encode()),
]


async def app(scope, receive, send):
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
        await send({"type": "http.response.body", "body": BODY})
    elif scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
