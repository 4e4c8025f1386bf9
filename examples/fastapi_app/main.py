"""FastAPI example: JSON, a path parameter, a validated POST body, a streamed
response, a WebSocket, lifespan state and a background task.

    m0serve --app-dir examples/fastapi_app main:app

Routes:
  GET  /                  {"hello": "world", "lifespan": ...}
  POST /items             an Item (JSON, validated by pydantic) -> 201, its id
  GET  /items/{item_id}   the item (item_id must be an int), ?q= echoed
  GET  /audit             what the background tasks have written so far
  GET  /stream?n=5        n lines, streamed (no Content-Length)
  WS   /ws                echoes each text message as "echo: <text>"
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TypedDict

from fastapi import BackgroundTasks, FastAPI, HTTPException, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field


class Item(BaseModel):
    name: str = Field(min_length=1, max_length=100)
    price: float = Field(gt=0)
    tags: list[str] = []


class State(TypedDict):
    started: str
    items: dict[int, dict[str, Any]]
    audit: list[str]


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[State]:
    # The server copies this dict into each request's state (request.state);
    # the copy is shallow, so `items` and `audit` are shared by all requests.
    yield {"started": "lifespan ran", "items": {}, "audit": []}


app = FastAPI(title="m0serve FastAPI example", lifespan=lifespan)


@app.get("/")
async def index(request: Request) -> dict[str, str]:
    return {"hello": "world", "lifespan": request.state.started}


async def write_audit(audit: list[str], line: str) -> None:
    # A background task runs after the response has been sent.
    await asyncio.sleep(0)
    audit.append(line)


@app.post("/items", status_code=201)
async def create_item(item: Item, request: Request, background: BackgroundTasks) -> dict[str, Any]:
    items = request.state.items
    item_id = len(items) + 1
    items[item_id] = item.model_dump()
    background.add_task(write_audit, request.state.audit, f"created item {item_id}: {item.name}")
    return {"id": item_id, **items[item_id]}


@app.get("/items/{item_id}")
async def read_item(item_id: int, request: Request, q: str | None = None) -> dict[str, Any]:
    item = request.state.items.get(item_id)
    if item is None:
        raise HTTPException(status_code=404, detail="no such item")
    return {"id": item_id, **item, "q": q}


@app.get("/audit")
async def audit(request: Request) -> list[str]:
    return request.state.audit


@app.get("/stream")
async def stream(n: int = 5) -> StreamingResponse:
    async def lines() -> AsyncIterator[str]:
        for i in range(n):
            yield f"line {i}\n"
            await asyncio.sleep(0.01)

    return StreamingResponse(lines(), media_type="text/plain")


@app.websocket("/ws")
async def echo(websocket: WebSocket) -> None:
    await websocket.accept()
    try:
        while True:
            text = await websocket.receive_text()
            await websocket.send_text(f"echo: {text}")
    except WebSocketDisconnect:
        pass
