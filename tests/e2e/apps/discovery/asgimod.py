"""Found by `m0serve asgimod`: a module whose ASGI callable is named `app`."""


async def app(scope, receive, send):
    if scope["type"] != "http":
        return  # lifespan: not supported, served anyway
    body = b"served by asgimod:app\n"
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
