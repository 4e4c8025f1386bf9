"""Starlette and FastAPI applications for the lifespan tests.

  starlette_state     lifespan yields {"db": "connected"}; GET /db answers
                      request.state.db; shutdown writes "closed db" to
                      $M0_TEST_SHUTDOWN_FILE (when set)
  fastapi_state       the same, with FastAPI
  starlette_failing   the lifespan raises RuntimeError before it yields
  fastapi_failing     the same, with FastAPI
"""

import contextlib
import os

from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route


@contextlib.asynccontextmanager
async def db_lifespan(app):
    yield {"db": "connected"}
    path = os.environ.get("M0_TEST_SHUTDOWN_FILE")
    if path:
        with open(path, "w") as f:
            f.write("closed db\n")


@contextlib.asynccontextmanager
async def failing_lifespan(app):
    raise RuntimeError("startup exploded: no database")
    yield  # pragma: no cover


async def db(request: Request) -> PlainTextResponse:
    return PlainTextResponse(request.state.db)


starlette_state = Starlette(routes=[Route("/db", db)], lifespan=db_lifespan)
starlette_failing = Starlette(routes=[Route("/db", db)], lifespan=failing_lifespan)

fastapi_state = FastAPI(lifespan=db_lifespan)
fastapi_state.add_api_route("/db", db)
fastapi_failing = FastAPI(lifespan=failing_lifespan)
fastapi_failing.add_api_route("/db", db)
