"""Which interpreter, process and thread served a request, for the tests
of --interpreters; at exit each interpreter leaves a file behind."""
import atexit
import json
import os
import sys
import threading
import time


def _bye():
    where = os.environ.get("M0_TEST_ATEXIT_DIR")
    if where:
        with open(os.path.join(where, "%d-%d" % (os.getpid(), id(sys.modules))), "w") as f:
            f.write("bye")


atexit.register(_bye)

_lock = threading.Lock()
_active = 0
_peak = 0  # the most requests this interpreter has run at once


def application(environ, start_response):
    global _active, _peak
    path = environ["PATH_INFO"]
    if path == "/events":  # a stream the server holds, on channel "c"
        start_response("200 OK", [("M0-Hold", "stream"), ("M0-Channel", "c")])
        return [b""]
    if path == "/publish":  # published from this interpreter: its frame id
        from m0serve import m0pub

        frame = m0pub.publish("c", str(id(sys.modules)))
        body = json.dumps({"id": frame, "interp": id(sys.modules)}).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]
    if path == "/slow":
        with _lock:
            _active += 1
            _peak = max(_peak, _active)
        time.sleep(float(environ.get("QUERY_STRING") or "0.2"))
        with _lock:
            _active -= 1
    elif path == "/forever":
        while True:
            time.sleep(0.05)
    body = json.dumps({
        "interp": id(sys.modules),
        "pid": os.getpid(),
        "thread": threading.get_ident(),
        "peak": _peak,
        "multiprocess": environ["wsgi.multiprocess"],
        "multithread": environ["wsgi.multithread"],
    }).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]
