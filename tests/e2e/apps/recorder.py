"""Applications that write down every request they are handed.

The hostile-HTTP table (tests/e2e/hostile.py) sends requests a server must
refuse before the application; these applications append one line per
request they see, "METHOD TARGET BODY-LENGTH", to the file named by
$M0_RECORD, so a test can tell that a refused request never reached them.
Each answers with a JSON object of the body's length and how the request's
target reached it (tests/e2e/test_target.py): the environ's PATH_INFO,
QUERY_STRING, REQUEST_URI and RAW_URI, the scope's path, raw_path and
query_string. `application` is the WSGI form, `app` the ASGI one (HTTP and
WebSocket).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any


def _record(method: str, target: str, length: int) -> None:
    path = os.environ.get("M0_RECORD")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{method} {target} {length}\n")


def application(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    body = environ["wsgi.input"].read()
    target = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")
    if environ.get("QUERY_STRING"):
        target += "?" + environ["QUERY_STRING"]
    _record(environ["REQUEST_METHOD"], target, len(body))
    seen = {k: environ.get(k) for k in ("PATH_INFO", "QUERY_STRING", "REQUEST_URI", "RAW_URI")}
    out = json.dumps({"seen": len(body), **seen}).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(out)))])
    return [out]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    target = scope["path"]  # the full path: root_path is a prefix of it
    if scope["query_string"]:
        target += "?" + scope["query_string"].decode("latin-1")
    if scope["type"] == "websocket":
        _record("WEBSOCKET", target, 0)
        await receive()
        await send({"type": "websocket.accept"})
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                return
            await send({"type": "websocket.send", "text": message.get("text") or ""})
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    _record(scope["method"], target, len(body))
    seen = {"path": scope["path"], "raw_path": scope["raw_path"].decode("latin-1"),
            "query_string": scope["query_string"].decode("latin-1"),
            "client": list(scope["client"]) if scope.get("client") else None}
    out = json.dumps({"seen": len(body), **seen}).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(out)).encode())]})
    await send({"type": "http.response.body", "body": out})
