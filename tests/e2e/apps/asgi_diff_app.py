"""One ASGI application served by uvicorn and by m0serve in
tests/e2e/test_asgi_diff.py, which compares what each server makes of it.

`app` is FastAPI (`api`) with a raw ASGI application, `raw_app`, mounted at
/raw and also reached under /bare/ with no framework in front of it: there
the server alone handles a callable that raises before it responds or
returns without responding.
`failing_startup` is a FastAPI application whose lifespan startup raises.

Form and multipart bodies are parsed here with the standard library: the
suite's requirements carry no python-multipart.
"""

import asyncio
import email.parser
import email.policy
import hashlib
import json
import urllib.parse
from contextlib import asynccontextmanager

from fastapi import FastAPI, Header, Query, Request, Response
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, PlainTextResponse, RedirectResponse, StreamingResponse
from pydantic import BaseModel

STARTED = {"lifespan": False}


@asynccontextmanager
async def lifespan(app):
    STARTED["lifespan"] = True
    yield {"from_lifespan": "yes"}


api = FastAPI(lifespan=lifespan)
api.add_middleware(CORSMiddleware, allow_origins=["https://allowed.example"],
                   allow_methods=["GET", "POST"], allow_headers=["x-custom"], max_age=600)


def text(b):
    return b.decode("latin-1")


def scope_view(scope):
    """The parts of a scope a server decides, as JSON."""
    return {
        "type": scope["type"],
        "asgi": scope.get("asgi"),
        "http_version": scope.get("http_version"),
        "method": scope.get("method"),
        "scheme": scope.get("scheme"),
        "path": scope.get("path"),
        "raw_path": text(scope["raw_path"]) if scope.get("raw_path") is not None else None,
        "query_string": text(scope.get("query_string", b"")),
        "root_path": scope.get("root_path"),
        "headers": [[text(n), text(v)] for n, v in scope.get("headers", [])],
        "client": list(scope["client"]) if scope.get("client") else None,
        "server": list(scope["server"]) if scope.get("server") else None,
        "has_state": "state" in scope,
        "extensions": scope.get("extensions"),
        "subprotocols": scope.get("subprotocols"),
        "keys": sorted(k for k in scope if k not in FRAMEWORK_KEYS),
    }


# What Starlette and FastAPI add to the scope on their way to an endpoint.
FRAMEWORK_KEYS = {"app", "router", "endpoint", "path_params", "route", "fastapi_astack",
                  "app_root_path", "fastapi_inner_astack", "fastapi_function_astack"}


# --------------------------------------------------------------------------
# FastAPI routes


@api.get("/json")
async def json_ok():
    return {"hello": "world", "n": 1, "list": [1, 2, 3], "unicode": "caf\u00e9 \u2713 \U0001f525"}


@api.get("/items/{item_id}")
async def item(item_id: int, q: str | None = None, tag: list[str] = Query(default=[])):
    return {"item_id": item_id, "q": q, "tag": tag}


@api.get("/path/{rest:path}")
async def path_param(rest: str, request: Request):
    return {"rest": rest, "path": request.url.path, "raw_path": text(request.scope["raw_path"]),
            "query": request.query_params.multi_items()}


@api.api_route("/scope", methods=["GET", "POST", "PUT", "DELETE", "PATCH"])
async def scope_echo(request: Request):
    view = scope_view(request.scope)
    view["state"] = dict(request.state._state) if hasattr(request.state, "_state") else None
    view["url"] = str(request.url)
    return view


@api.get("/state")
async def state(request: Request):
    return {"from_lifespan": request.state.from_lifespan, "started": STARTED["lifespan"]}


@api.post("/echo")
async def echo(request: Request):
    body = await request.body()
    return {"content_type": request.headers.get("content-type"), "length": len(body),
            "sha256": hashlib.sha256(body).hexdigest(),
            "head": text(body[:64])}


class Item(BaseModel):
    name: str
    price: float
    tags: list[str] = []


@api.post("/model", status_code=201)
async def model(item: Item, x_custom: str | None = Header(default=None)):
    return {"item": item.model_dump(), "x_custom": x_custom}


@api.post("/form")
async def form(request: Request):
    body = await request.body()
    return {"content_type": request.headers.get("content-type"),
            "fields": urllib.parse.parse_qsl(body.decode(), keep_blank_values=True)}


@api.post("/upload")
async def upload(request: Request):
    body = await request.body()
    head = f"Content-Type: {request.headers['content-type']}\r\n\r\n".encode()
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    parts = []
    for part in msg.iter_parts():
        data = part.get_payload(decode=True) or b""
        parts.append({"name": part.get_param("name", header="content-disposition"),
                      "filename": part.get_filename(), "content_type": part.get_content_type(),
                      "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    return {"parts": parts, "length": len(body)}


@api.get("/cookies/set")
async def cookies_set():
    r = JSONResponse({"set": 3})
    r.set_cookie("a", "1")
    r.set_cookie("b", "two words", httponly=True, samesite="strict", path="/cookies")
    r.set_cookie("c", "3", max_age=60, secure=True)
    return r


@api.get("/cookies/echo")
async def cookies_echo(request: Request):
    return {"cookies": request.cookies, "raw": request.headers.getlist("cookie")}


@api.get("/redirect/{code}")
async def redirect(code: int):
    return RedirectResponse("/json?from=redirect", status_code=code)


@api.get("/redirect-abs")
async def redirect_abs(request: Request):
    return RedirectResponse(str(request.url_for("json_ok")))


@api.get("/status/{code}")
async def status(code: int):
    if code in (204, 304):
        return Response(status_code=code)
    return PlainTextResponse(f"status {code}\n", status_code=code)


@api.get("/headers/repeated")
async def repeated_headers():
    r = PlainTextResponse("repeated\n")
    r.raw_headers.extend([(b"x-multi", b"one"), (b"x-multi", b"two"), (b"x-multi", b"three"),
                          (b"X-Mixed-Case", b"Value With Spaces"), (b"x-empty", b""),
                          (b"link", b"</a>; rel=preload"), (b"link", b"</b>; rel=preload")])
    return r


@api.get("/headers/echo")
async def headers_echo(request: Request):
    return {"headers": [[text(n), text(v)] for n, v in request.scope["headers"]]}


@api.get("/bytes/{n}")
async def some_bytes(n: int):
    return Response(bytes(i % 251 for i in range(n)), media_type="application/octet-stream")


async def chunks(n, delay, empty=False):
    for i in range(n):
        if empty:
            yield b""
        yield f"chunk {i}\n".encode()
        if delay:
            await asyncio.sleep(delay)


@api.get("/stream")
async def stream(n: int = 5, delay: float = 0.0, empty: bool = False, length: bool = False):
    headers = {}
    if length:
        headers["content-length"] = str(sum(len(f"chunk {i}\n") for i in range(n)))
    return StreamingResponse(chunks(n, delay, empty), media_type="text/plain", headers=headers)


@api.get("/stream/empty")
async def stream_empty():
    async def nothing():
        return
        yield b""
    return StreamingResponse(nothing(), media_type="text/plain")


@api.get("/stream/raise")
async def stream_raise():
    async def gen():
        yield b"first chunk\n"
        raise RuntimeError("boom mid-stream")
    return StreamingResponse(gen(), media_type="text/plain")


@api.get("/raise")
async def raise_():
    raise RuntimeError("boom in a FastAPI endpoint")


# --------------------------------------------------------------------------
# a raw ASGI application, mounted at /raw


async def read_body(receive):
    body, more = b"", True
    while more:
        message = await receive()
        assert message["type"] == "http.request", message
        body += message.get("body", b"")
        more = message.get("more_body", False)
    return body


async def raw_app(scope, receive, send):
    path = scope["path"].removeprefix(scope.get("root_path", "")).removeprefix("/bare")
    if scope["type"] == "websocket":
        await websocket_echo(scope, receive, send)
        return
    if path == "/raise":
        raise RuntimeError("boom before the response")
    if path == "/noresponse":
        return
    if path == "/start-only":  # starts a response and never sends its body
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain")]})
        return
    if path == "/raise-after-start":
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"partial\n", "more_body": True})
        raise RuntimeError("boom after the response started")
    if path == "/length-mismatch":  # names a Content-Length and sends less
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain"), (b"content-length", b"10")]})
        await send({"type": "http.response.body", "body": b"short"})
        return
    if path == "/length-over":  # names a Content-Length and sends more
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain"), (b"content-length", b"3")]})
        await send({"type": "http.response.body", "body": b"too long"})
        return
    if path == "/server-header":  # the application's own Server and Date
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain"), (b"server", b"app-server/1.0"),
                                (b"date", b"Thu, 01 Jan 1970 00:00:00 GMT")]})
        await send({"type": "http.response.body", "body": b"own server header\n"})
        return
    if path == "/connection-close":  # the application asks to close the connection
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain"), (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": b"closing\n"})
        return
    body = await read_body(receive)
    view = scope_view(scope)
    view["body_length"] = len(body)
    view["body_sha256"] = hashlib.sha256(body).hexdigest()
    out = json.dumps(view).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(out)).encode())]})
    await send({"type": "http.response.body", "body": out})


async def websocket_echo(scope, receive, send):
    message = await receive()
    assert message["type"] == "websocket.connect"
    if scope["path"].endswith("/deny"):
        await send({"type": "websocket.close", "code": 1000})
        return
    if scope["path"].endswith("/deny-response"):  # the WebSocket Denial Response extension
        assert "websocket.http.response" in scope["extensions"]
        await send({"type": "websocket.http.response.start", "status": 401,
                    "headers": [(b"content-type", b"text/plain"), (b"x-why", b"no token")]})
        await send({"type": "websocket.http.response.body", "body": b"log in ", "more_body": True})
        await send({"type": "websocket.http.response.body", "body": b"first\n"})
        return
    subprotocols = scope.get("subprotocols") or []
    await send({"type": "websocket.accept", "subprotocol": subprotocols[0] if subprotocols else None})
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            return
        if message.get("text") == "scope":
            await send({"type": "websocket.send", "text": json.dumps(scope_view(scope))})
        elif message.get("text") == "close":
            await send({"type": "websocket.close", "code": 4001, "reason": "asked to"})
            return
        elif message.get("text") is not None:
            await send({"type": "websocket.send", "text": message["text"]})
        else:
            await send({"type": "websocket.send", "bytes": message["bytes"]})


api.mount("/raw", raw_app)


async def app(scope, receive, send):
    """FastAPI, but /bare/ goes to raw_app with no framework in between, so
    what the server itself does about a failing application shows."""
    if scope["type"] != "lifespan" and scope["path"].startswith("/bare/"):
        await raw_app(scope, receive, send)
    else:
        await api(scope, receive, send)


# --------------------------------------------------------------------------
# an application whose lifespan startup fails


@asynccontextmanager
async def refusing_lifespan(app):
    raise RuntimeError("startup refused")
    yield


failing_startup = FastAPI(lifespan=refusing_lifespan)
