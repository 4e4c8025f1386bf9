"""The ASGI application of the package's examples: its lifespan startup
puts a greeting in the state every request's scope carries, and its
shutdown takes it out."""


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                scope["state"]["greeting"] = "hello from the lifespan startup"
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                scope["state"].clear()
                await send({"type": "lifespan.shutdown.complete"})
                return
    elif scope["type"] == "http":
        body = ("%s, at %s\n" % (scope["state"]["greeting"], scope["path"])).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": body})
