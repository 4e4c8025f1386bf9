"""WSGI applications the cgo layer's tests call directly."""
import signal
import sys
import threading
import time
import wsgiref.validate

calls = 0
closed = 0


def hello(environ, start_response):
    global calls
    calls += 1
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "5")])
    return [b"hello"]


def echo_environ(environ, start_response):
    body = environ["wsgi.input"].read()
    start_response("201 Created", [("Content-Type", "text/plain")])
    out = "%s %s %r %s" % (environ["REQUEST_METHOD"], environ["PATH_INFO"], body, environ.get("HTTP_X_TEST", "-"))
    return [out.encode("latin-1")]


def raises(environ, start_response):
    raise ZeroDivisionError("deliberate")


class Body:
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        for i in range(self.n):
            yield b"chunk%d;" % i

    def close(self):
        global closed
        closed += 1


def stream(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return Body(3)


def generator_app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    yield b"first"
    yield b"second"


def non_bytes(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return ["text"]


def no_start(environ, start_response):
    return [b"x"]


def bad_status(environ, start_response):
    start_response("abc", [])
    return [b""]


def crlf(environ, start_response):
    start_response("200 OK", [("X-A", "x\r\nSet-Cookie: evil=1")])
    return [b""]




validated = wsgiref.validate.validator(hello)


def environ_items(environ, start_response):
    """Answers the environ's str items, its keys that are not str, and the
    body, as JSON (FuzzEnvironCall)."""
    import json

    body = environ["wsgi.input"].read()
    out = {
        "env": {k: v for k, v in environ.items() if type(k) is str and type(v) is str},
        "not_str": [repr(k) for k, v in environ.items() if type(k) is not str or (not k.startswith("wsgi.") and type(v) is not str)],
        "body": body.decode("latin-1") if type(body) is bytes else None,
    }
    start_response("200 OK", [("Content-Type", "application/json")])
    return [json.dumps(out).encode()]


_whoami_lock = threading.Lock()
_whoami_active = 0
_whoami_peak = 0


def whoami(environ, start_response):
    """Which interpreter ran the request, and the most requests it has run
    at once: the id of its sys.modules (one per interpreter) and the peak."""
    global _whoami_active, _whoami_peak
    with _whoami_lock:
        _whoami_active += 1
        _whoami_peak = max(_whoami_peak, _whoami_active)
    time.sleep(0.0005)  # lets the interpreter's GIL go, as I/O does
    with _whoami_lock:
        _whoami_active -= 1
        peak = _whoami_peak
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"%d %d" % (id(sys.modules), peak)]


def sqlite_function(environ, start_response):
    """A query calling a Python function: sqlite3 calls back into Python
    through PyGILState_Ensure, which must find this interpreter's thread
    state on a thread that also runs the main interpreter."""
    import sqlite3

    db = sqlite3.connect(":memory:")
    db.create_function("twice", 1, lambda x: 2 * x)
    (n,) = db.execute("SELECT twice(21)").fetchone()
    db.close()
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"%d %d" % (id(sys.modules), n)]


def publishes(environ, start_response):
    import _m0

    start_response("200 OK", [("Content-Type", "text/plain")])
    return [repr(_m0.publish("news", b"x")).encode()]
