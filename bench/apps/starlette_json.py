"""Starlette JSON endpoint for bench/run asgi: the framework under FastAPI,
without FastAPI's validation and dependency layers.

GET /json answers 200 application/json {"message":"Hello, World!"}.
"""

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


async def j(request: Request) -> JSONResponse:
    return JSONResponse({"message": "Hello, World!"})


app = Starlette(routes=[Route("/json", j)])
