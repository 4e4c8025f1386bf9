"""WSGI applications for the bridge's tests. Each is wrapped in
wsgiref.validate.validator unless it is broken on purpose."""
import json
import threading
import time
from wsgiref.validate import validator

closed = 0
_lock = threading.Lock()


def _environ(environ, start_response):
    body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    out = {k: v for k, v in environ.items() if isinstance(v, (str, int, bool, tuple))}
    out["body"] = body.decode("latin-1")
    data = json.dumps(out).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
    return [data]


environ = validator(_environ)


class _Counted:
    def __init__(self, n, delay):
        self.n, self.delay = n, delay

    def __iter__(self):
        for i in range(self.n):
            if i and self.delay:
                time.sleep(self.delay)
            yield b"part %d\n" % i

    def close(self):
        global closed
        with _lock:
            closed += 1


def _stream(environ, start_response):
    q = dict(p.split("=") for p in environ["QUERY_STRING"].split("&") if p)
    start_response("200 OK", [("Content-Type", "text/plain")])
    return _Counted(int(q.get("n", 3)), float(q.get("delay", 0)))


stream = validator(_stream)


def _closed(environ, start_response):
    data = str(closed).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(data)))])
    return [data]


closed_count = validator(_closed)


def _sleep(environ, start_response):
    time.sleep(float(environ["QUERY_STRING"] or 1))
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "5")])
    return [b"slept"]


sleep = validator(_sleep)


def raise_after_head(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    yield b"first\n"
    raise RuntimeError("after the head")


def raise_before(environ, start_response):
    raise ValueError("before start_response")


def bad_header(environ, start_response):
    start_response("200 OK", [("X-Split", "a\r\nSet-Cookie: evil=1")])
    return [b"never"]


def non_latin1(environ, start_response):
    start_response("200 OK", [("X-Name", "caf\u00e9 \u20ac")])
    return [b"never"]


def _head(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "1234")])
    return [] if environ["REQUEST_METHOD"] == "HEAD" else [b"x" * 1234]


head = validator(_head)


def sized(environ, start_response):
    """?body=N bytes, with Content-Length: ?named when given; the same
    answer to a HEAD. Not validated: a length that is not the body's is
    the point."""
    q = dict(p.split("=") for p in environ["QUERY_STRING"].split("&") if p)
    headers = [("Content-Length", q["named"])] if "named" in q else []
    start_response("200 OK", headers)
    return [b"x" * int(q.get("body", 0))]


def _no_content(environ, start_response):
    start_response("204 No Content", [])
    return []


no_content = validator(_no_content)


def _write(environ, start_response):
    write = start_response("200 OK", [("Content-Type", "text/plain")])
    write(b"written;")
    return [b"returned"]


write = validator(_write)


def big(environ, start_response):
    # Not wrapped: the validator turns a list into an iterator, and a list
    # body is what must be buffered and sized.
    data = b"0123456789abcdef" * 65536  # 1 MiB
    start_response("200 OK", [("Content-Type", "application/octet-stream")])
    return [data]


def endless(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])

    def gen():
        while True:
            time.sleep(0.01)
            yield b"tick\n"

    return gen()


def exc_keyword(environ, start_response):
    # Not validated: the validator refuses keyword arguments, which PEP 3333
    # allows a server to take.
    start_response("200 OK", [("Content-Type", "text/plain")])
    try:
        raise KeyError("k")
    except KeyError:
        import sys

        start_response("500 Internal Server Error", [("Content-Type", "text/plain")], exc_info=sys.exc_info())
    return [b"own error page"]



def write_then_exc(environ, start_response):
    # Not validated: the validator forbids this on purpose; the server must
    # answer it with a clean error, never a mix of two responses.
    write = start_response("200 OK", [("Content-Type", "text/plain")])
    write(b"partial;")
    try:
        raise KeyError("k")
    except KeyError:
        import sys

        start_response("500 Internal Server Error", [("Content-Type", "text/plain")], sys.exc_info())
    return [b"error page"]


_sqlite = {}


def _same_thread(environ, start_response):
    # A connection made on a server's first request and reused: sqlite3
    # refuses it on any other thread.
    import sqlite3

    key = environ["QUERY_STRING"]
    if key not in _sqlite:
        _sqlite[key] = sqlite3.connect(":memory:")
    out = str(_sqlite[key].execute("select 1").fetchone()[0]).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(out)))])
    return [out]


same_thread = validator(_same_thread)


def _raw_body(environ, start_response):
    data = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    data += b"|" + environ.get("HTTP_COOKIE", "").encode("latin-1")
    start_response("200 OK", [("Content-Type", "application/octet-stream"), ("Content-Length", str(len(data)))])
    return [data]


raw_body = validator(_raw_body)


_waiting = {"finally": 0, "closed": 0}


class _Waiting:
    """A stream that sends its first part, then waits for data that never
    comes, producing nothing (an SSE generator on a quiet channel)."""

    def __iter__(self):
        try:
            yield b"first\n"
            deadline = time.monotonic() + 5  # a server that never tells it ends in time
            while time.monotonic() < deadline:
                time.sleep(0.02)
        finally:
            with _lock:
                _waiting["finally"] += 1

    def close(self):
        with _lock:
            _waiting["closed"] += 1


def _waiting_app(environ, start_response):
    if environ["PATH_INFO"] == "/state":
        data = json.dumps(_waiting).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
        return [data]
    start_response("200 OK", [("Content-Type", "text/plain")])
    it = _Waiting()
    gen = iter(it)

    class Body:  # the iterator and its close(), as a framework's response is
        def __iter__(self):
            return gen

        def close(self):
            gen.close()
            it.close()

    return Body()


waiting = _waiting_app


def _link(environ, start_response):
    # The URL the application would link to itself with: wsgiref builds it
    # from SCRIPT_NAME and PATH_INFO, as url_for and reverse do.
    from wsgiref.util import request_uri

    body = f"{environ['SCRIPT_NAME']}|{environ['PATH_INFO']}|{request_uri(environ, include_query=False)}".encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


link = validator(_link)


def _mark(environ, start_response):
    # Notes in the file the query names that it started, sleeps half a
    # second, then notes that it is done: its order against other requests
    # shows, without a clock.
    path = environ["QUERY_STRING"]
    with open(path, "a") as f:
        f.write("started\n")
    time.sleep(0.5)
    with open(path, "a") as f:
        f.write("done\n")
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "4")])
    return [b"done"]


mark = validator(_mark)


_REQUIRED = ("REQUEST_METHOD", "SCRIPT_NAME", "PATH_INFO", "QUERY_STRING", "SERVER_NAME", "SERVER_PORT",
             "SERVER_PROTOCOL", "wsgi.version", "wsgi.url_scheme", "wsgi.input", "wsgi.errors",
             "wsgi.multithread", "wsgi.multiprocess", "wsgi.run_once")


def check_environ(environ, start_response):
    """Checks the environ against PEP 3333 and answers its CGI variables,
    the body and what is wrong with it, as JSON. Not wrapped: what the
    validator finds is reported, not raised."""
    import warnings
    from wsgiref.validate import check_environ as wsgiref_check

    problems = []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an unknown method is a warning
            wsgiref_check(environ)
    except AssertionError as e:
        problems.append("wsgiref.validate: %s" % e)
    if type(environ) is not dict:
        problems.append("environ is a %s" % type(environ).__name__)
    for k in _REQUIRED:
        if k not in environ:
            problems.append("%s is missing" % k)
    cgi = {}
    for k, v in environ.items():
        if type(k) is not str:
            problems.append("key %r is not a str" % (k,))
            continue
        if k.startswith("wsgi.") or k.startswith("m0."):
            continue
        if type(v) is not str:
            problems.append("%s is a %s, not a str" % (k, type(v).__name__))
            continue
        try:
            v.encode("latin-1")
        except UnicodeEncodeError:
            problems.append("%s = %r is not latin-1" % (k, v))
        cgi[k] = v
    if environ.get("wsgi.version") != (1, 0) or environ.get("wsgi.url_scheme") not in ("http", "https"):
        problems.append("wsgi.version %r, wsgi.url_scheme %r" % (environ.get("wsgi.version"), environ.get("wsgi.url_scheme")))
    for k in ("wsgi.multithread", "wsgi.multiprocess", "wsgi.run_once"):
        if type(environ.get(k)) is not bool:
            problems.append("%s is not a bool" % k)
    n = environ.get("CONTENT_LENGTH", "")
    if n and not n.isdigit():
        problems.append("CONTENT_LENGTH %r" % n)
    body = environ["wsgi.input"].read(int(n) if n.isdigit() else -1)
    if type(body) is not bytes:
        problems.append("wsgi.input read a %s" % type(body).__name__)
        body = b""
    rest = environ["wsgi.input"].read()
    if rest:
        problems.append("wsgi.input holds %d bytes past CONTENT_LENGTH" % len(rest))
    data = json.dumps({"cgi": cgi, "body": body.decode("latin-1"), "problems": problems}).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
    return [data]


def page(environ, start_response):
    """A page as a framework answers one: a few headers, a body of some KiB
    (3,000 bytes of text, or as many as the query string says)."""
    body = b"<p>" + b"x" * int(environ.get("QUERY_STRING") or 3000) + b"</p>\n"
    start_response("200 OK", [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(body))),
                              ("Vary", "Cookie"), ("X-Frame-Options", "DENY"), ("X-Content-Type-Options", "nosniff"),
                              ("Referrer-Policy", "same-origin"), ("Cross-Origin-Opener-Policy", "same-origin")])
    return [body]
