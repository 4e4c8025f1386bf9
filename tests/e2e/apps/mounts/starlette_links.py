"""A Starlette application that reports the links url_for builds, with a
lifespan that counts its startups (each ASGI mount runs its own)."""

import contextlib

from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

STARTED = []


async def index(request):
    return JSONResponse({
        "url": str(request.url_for("item", n=3)),
        "root_path": request.scope["root_path"],
        "path": request.scope["path"],
        "startups": len(STARTED),
    })


async def item(request):
    return JSONResponse({"n": request.path_params["n"]})


@contextlib.asynccontextmanager
async def lifespan(app):
    STARTED.append(app)
    yield


app = Starlette(routes=[Route("/", index), Route("/items/{n:int}", item, name="item")], lifespan=lifespan)
