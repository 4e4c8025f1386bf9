"""A WSGI application with no server: the benchmark's in-process row.

    python inprocess.py --port PORT --dir DIR MODULE:CALLABLE

It imports the application as a server would and answers on 127.0.0.1:PORT
(one thread, wsgiref) so that the harness can check its answer like any
server's. Loaded, it serves nothing: ``POST /loop?path=P&seconds=S`` calls
the application in a loop for S seconds, in this process, with the environ
a server builds for wrk's ``GET P HTTP/1.1`` and ``Host``, reads the whole
body and calls ``close()``, and answers ``{"calls": N, "seconds": T}``. The
harness measures this process's CPU over the loop as it measures a
server's: the rate is what the application costs on its own, the limit no
server can pass.
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, make_server

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def environ(path: str, port: int) -> dict[str, Any]:
    """The environ of wrk's request, as the servers measured build it."""
    path, _, query = path.partition("?")
    return {
        "REQUEST_METHOD": "GET", "SCRIPT_NAME": "", "PATH_INFO": path, "QUERY_STRING": query,
        "SERVER_NAME": "127.0.0.1", "SERVER_PORT": str(port), "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1", "REMOTE_PORT": "40000", "HTTP_HOST": f"127.0.0.1:{port}",
        "wsgi.version": (1, 0), "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(b""),
        "wsgi.errors": sys.stderr, "wsgi.multithread": True, "wsgi.multiprocess": False,
        "wsgi.run_once": False, "wsgi.input_terminated": True,
    }


def loop(app: WSGIApp, path: str, port: int, seconds: float) -> tuple[int, float]:
    """Calls app until seconds have passed (checked every 20 calls). Every
    call must call start_response once and answer 200: a rate of errors
    measures nothing."""
    statuses: list[str] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], None]:
        statuses.append(status)
        return lambda data: None

    calls = 0
    begin = time.perf_counter()
    end = begin + seconds
    while True:
        for _ in range(20):
            body = app(environ(path, port), start_response)
            try:
                for _ in body:
                    pass
            finally:
                close = getattr(body, "close", None)
                if close is not None:
                    close()
        calls += 20
        if len(statuses) != 20 or any(not s.startswith("200 ") for s in statuses):
            wrong = [s for s in statuses if not s.startswith("200 ")]
            raise RuntimeError(f"the application answered {wrong[0]!r}" if wrong else
                               f"the application called start_response {len(statuses)} times in 20 calls")
        statuses.clear()
        now = time.perf_counter()
        if now >= end:
            return calls, now - begin


class Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("spec")
    args = ap.parse_args()
    sys.path.insert(0, args.dir)
    module, _, name = args.spec.partition(":")
    app: WSGIApp = getattr(importlib.import_module(module), name)

    def control(env: dict[str, Any], respond: Callable[..., Any]) -> Iterable[bytes]:
        if env["REQUEST_METHOD"] == "POST" and env["PATH_INFO"] == "/loop":
            q = parse_qs(env["QUERY_STRING"])
            try:
                calls, took = loop(app, q["path"][0], args.port, float(q["seconds"][0]))
            except Exception as e:
                respond("500 Internal Server Error", [("Content-Type", "text/plain")])
                return [str(e).encode()]
            respond("200 OK", [("Content-Type", "application/json")])
            return [json.dumps({"calls": calls, "seconds": took}).encode()]
        return app(env, respond)

    with make_server("127.0.0.1", args.port, control, handler_class=Quiet) as server:
        server.serve_forever()


if __name__ == "__main__":
    main()
