"""A WSGI app for probing how the server implements PEP 3333.

`application` is wrapped in wsgiref.validate.validator, which raises
AssertionError whenever the server (or this app) breaks the spec; the
server then answers 500 and the tests notice.

Routes:
  /ok                         200 "ok\\n"
  /environ[/anything]         JSON: str/int/bool environ values + wsgi.* facts
  /input?mode=M[&n=K]         read wsgi.input (read:n, readline, readline:n,
                              readlines, iter, readall) and echo what was read
  /write                      output via start_response's write(), then an iterable
  /stream?n=K&delay=S&id=X    generator body, no Content-Length; close() counted per id
  /closecount?id=X            how many times close() ran on /stream bodies with that id
  /stream-raise               yields one chunk, then raises
  /filewrapper                environ['wsgi.file_wrapper'](open(file, 'rb'))
  /exc-info                   start_response, then start_response again with exc_info
  /sleep?s=S                  sleeps S seconds, then 200
  /inflight                   number of /sleep requests currently running
"""

import json
import os
import sys
import tempfile
import threading
import time
from urllib.parse import parse_qs
from wsgiref.validate import validator

# Served by /filewrapper; the tests rebuild the same bytes. One shared file,
# written once (atomically, so concurrent servers can share it).
FILE_BYTES = bytes(range(256)) * 400
FILE_PATH = os.path.join(tempfile.gettempdir(), "m0-e2e-filewrapper-v1.bin")
if not os.path.exists(FILE_PATH) or os.path.getsize(FILE_PATH) != len(FILE_BYTES):
    _fd, _tmp = tempfile.mkstemp(dir=os.path.dirname(FILE_PATH))
    with os.fdopen(_fd, "wb") as _f:
        _f.write(FILE_BYTES)
    os.replace(_tmp, FILE_PATH)

_lock = threading.Lock()
CLOSE_COUNTS = {}  # stream id -> number of close() calls
INFLIGHT = {"sleep": 0}


def _query(environ):
    return {k: v[-1] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}


def _respond(start_response, body, status="200 OK", ctype="text/plain; charset=utf-8", extra=()):
    if isinstance(body, str):
        body = body.encode("utf-8")
    start_response(status, [("Content-Type", ctype), ("Content-Length", str(len(body))), *extra])
    return [body]


def _json(start_response, obj, status="200 OK"):
    return _respond(start_response, json.dumps(obj), status, "application/json")


class CountedStream:
    """A body iterable that records close() calls in CLOSE_COUNTS[stream_id]."""

    def __init__(self, stream_id, n, delay, parts=None):
        self.stream_id, self.n, self.delay, self.parts = stream_id, n, delay, parts

    def __iter__(self):
        if self.parts is not None:
            yield from self.parts()
            return
        for i in range(self.n):
            if i:
                time.sleep(self.delay)
            yield f"chunk {i}\n".encode()

    def close(self):
        with _lock:
            CLOSE_COUNTS[self.stream_id] = CLOSE_COUNTS.get(self.stream_id, 0) + 1


def environ_report(environ):
    plain = {k: v for k, v in environ.items() if isinstance(v, (str, int, bool))}
    wsgi = {k: type(v).__name__ for k, v in environ.items() if k.startswith("wsgi.")}
    inp, err = environ.get("wsgi.input"), environ.get("wsgi.errors")
    return {
        "environ": plain,
        "wsgi_types": wsgi,
        "wsgi.version": list(environ["wsgi.version"]),
        "input_methods": [m for m in ("read", "readline", "readlines", "__iter__") if hasattr(inp, m)],
        "errors_methods": [m for m in ("write", "writelines", "flush") if hasattr(err, m)],
        "file_wrapper_callable": callable(environ.get("wsgi.file_wrapper")),
    }


def read_input(environ, mode, n):
    """Read wsgi.input as `mode` says; returns the list of pieces read."""
    inp = environ["wsgi.input"]
    # The validator's wrapper re-implements __iter__ with readline() and
    # forbids read() without a size; go around it to reach the server's object.
    server_inp = getattr(inp, "input", inp)
    pieces = []
    if mode == "read":
        for _ in range(100000):
            piece = inp.read(n)
            if not piece:
                break
            pieces.append(piece)
    elif mode == "readline":
        for _ in range(100000):
            piece = inp.readline(n) if n is not None else inp.readline()
            if not piece:
                break
            pieces.append(piece)
    elif mode == "readlines":
        pieces = inp.readlines()
    elif mode == "iter":
        pieces = list(server_inp)
    elif mode == "readall":
        pieces = [server_inp.read()]
    else:
        raise ValueError(f"unknown mode {mode!r}")
    return pieces


def app(environ, start_response):
    path = environ["PATH_INFO"]
    q = _query(environ)

    if path == "/ok":
        return _respond(start_response, "ok\n")

    if path == "/bytes":
        # A large streamed body in 64 KiB parts, counted like /stream.
        total = int(q.get("n", "0"))

        def parts():
            sent = 0
            while sent < total:
                part = min(65536, total - sent)
                sent += part
                yield b"b" * part

        stream = CountedStream(q.get("id", ""), 0, 0, parts)
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        return stream

    if path == "/sched":
        import os
        import threading

        tid = threading.get_native_id()
        return _json(start_response, {"nice": os.getpriority(os.PRIO_PROCESS, tid),
                                      "batch": os.sched_getscheduler(0) == os.SCHED_BATCH})

    if path == "/orphan":
        # The shell exits at once; its background sleep is orphaned and
        # handed to PID 1, which must reap it when it ends.
        import subprocess

        subprocess.Popen(["sh", "-c", "sleep 0.2 &"]).wait()
        return _respond(start_response, "spawned\n")

    if path == "/environ" or path.startswith("/environ/"):
        return _json(start_response, environ_report(environ))

    if path == "/input":
        n = int(q["n"]) if "n" in q else None
        pieces = read_input(environ, q.get("mode", "read"), n)
        return _json(start_response, {
            "pieces": [p.decode("latin-1") for p in pieces],
            "types": sorted({type(p).__name__ for p in pieces}),
            "content_length": environ.get("CONTENT_LENGTH"),
        })

    if path == "/write":
        write = start_response("200 OK", [("Content-Type", "text/plain")])
        write(b"from write 1\n")
        write(b"from write 2\n")
        return [b"from iterable\n"]

    if path == "/stream":
        stream = CountedStream(q.get("id", ""), int(q.get("n", "5")), float(q.get("delay", "0")))
        start_response("200 OK", [("Content-Type", "text/plain")])
        return stream

    if path == "/closecount":
        with _lock:
            count = CLOSE_COUNTS.get(q.get("id", ""), 0)
        return _json(start_response, {"count": count})

    if path == "/stream-raise":
        def gen():
            yield b"first chunk\n"
            raise RuntimeError("stream-raise: failure after the first chunk")

        start_response("200 OK", [("Content-Type", "text/plain")])
        return gen()

    if path == "/filewrapper":
        start_response("200 OK", [
            ("Content-Type", "application/octet-stream"),
            ("Content-Length", str(len(FILE_BYTES))),
        ])
        return environ["wsgi.file_wrapper"](open(FILE_PATH, "rb"), 8192)

    if path == "/exc-info":
        start_response("200 OK", [("Content-Type", "text/plain"), ("X-First-Call", "yes")])
        try:
            raise ValueError("exc-info: failure before the body")
        except ValueError:
            body = b"the app's own error page\n"
            start_response("500 Internal Server Error", [
                ("Content-Type", "text/plain"),
                ("Content-Length", str(len(body))),
            ], sys.exc_info())
            return [body]

    if path == "/sleep":
        with _lock:
            INFLIGHT["sleep"] += 1
        try:
            time.sleep(float(q.get("s", "1")))
        finally:
            with _lock:
                INFLIGHT["sleep"] -= 1
        return _respond(start_response, "slept\n")

    if path == "/inflight":
        with _lock:
            return _json(start_response, dict(INFLIGHT))

    return _respond(start_response, "not found\n", "404 Not Found")


application = validator(app)
