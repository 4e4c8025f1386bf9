"""Found by `m0serve asgipkg` as asgipkg.main:app (FastAPI's layout)."""


async def app(scope, receive, send):
    if scope["type"] != "http":
        return  # lifespan: not supported, served anyway
    body = b"served by asgipkg.main:app\n"
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
