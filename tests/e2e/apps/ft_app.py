"""A WSGI application for the free-threaded suite: the GIL's state, and a
rendezvous of two requests that each spin in pure Python until the other
has started (the CPU-bound view is bench/apps/cpu_bound.py).

The switch interval is set so long that, on a GIL build, a thread running
pure Python never hands the GIL over: the rendezvous can only meet where two
threads run Python at once."""

import json
import sys
import time

sys.setswitchinterval(1000.0)

_arrived = {"a": False, "b": False}


def application(environ, start_response):
    path = environ["PATH_INFO"]
    q = dict(p.split("=", 1) for p in environ["QUERY_STRING"].split("&") if "=" in p)
    if path == "/gil":
        gil = getattr(sys, "_is_gil_enabled", lambda: True)()
        body = json.dumps({"gil_enabled": gil}).encode()
    elif path == "/meet":
        # Spins, without a call that would let the GIL go, until the other
        # side has arrived or the deadline passes.
        me, other = q["side"], "b" if q["side"] == "a" else "a"
        deadline = time.monotonic() + float(q.get("within", "5"))
        _arrived[me] = True
        met = False
        while time.monotonic() < deadline:
            if _arrived[other]:
                met = True
                break
        body = json.dumps({"met": met}).encode()
    elif path == "/reset":
        _arrived["a"] = _arrived["b"] = False
        body = b"{}"
    else:
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found\n"]
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]
