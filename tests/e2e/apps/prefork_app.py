"""A WSGI application for m0serve --workers N: every answer says which
process served it, so a test knows which worker holds a connection.

  /pid                      {"pid": os.getpid()}
  /sleep?s=S&tag=T          writes $M0_PREFORK_STATE/started-T, sleeps S s, {"pid", "slept"}
  /hold?c=CH                an SSE hold of channel CH (X-Pid names the worker)
  /publish?c=CH             publishes the body on CH: {"id", "pid"}
  /child?c=CH&form=F&data=D a child process publishes D on CH, passed
                            m0pub.child_fds() (F=numbered) or m0pub.bus_write_fds()
                            (F=unnumbered): {"result", "pid", "child_pid", "stderr"}
  /has-child-fds            whether m0pub has child_fds and bus_write_fds
  /orphan                   a shell that exits at once, its background sleep orphaned

Under M0_PREFORK_DIE_FILE=PATH, every worker exits (os._exit(3)) 0.2 s
after PATH exists: a crash loop that starts only once a test says so.
"""

import json
import os
import subprocess
import sys
import threading
import time
from urllib.parse import parse_qsl

from m0serve import m0pub

STATE = os.environ.get("M0_PREFORK_STATE")
DIE_FILE = os.environ.get("M0_PREFORK_DIE_FILE")

# The child publisher: run as `python -c CHILD CHANNEL DATA`; prints what
# m0pub.publish returned.
CHILD = (
    "import json, sys\n"
    "from m0serve import m0pub\n"
    "print(json.dumps(m0pub.publish(sys.argv[1], sys.argv[2])))\n"
)


def _die_when_told():
    while not os.path.exists(DIE_FILE):
        time.sleep(0.02)
    time.sleep(0.2)
    os._exit(3)


if DIE_FILE:
    threading.Thread(target=_die_when_told, daemon=True).start()


def _json(start_response, obj, status="200 OK", extra=()):
    body = json.dumps(obj).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body))), *extra])
    return [body]


def _child(channel, form, data):
    fds = m0pub.child_fds() if form == "numbered" else m0pub.bus_write_fds()
    package = os.path.dirname(os.path.dirname(os.path.abspath(m0pub.__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package, env.get("PYTHONPATH")) if p)
    python = os.environ.get("M0_PREFORK_PYTHON") or sys.executable
    p = subprocess.run([python, "-c", CHILD, channel, data], pass_fds=tuple(fds), env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    out = p.stdout.decode().strip()
    return {"result": json.loads(out) if p.returncode == 0 and out else None, "code": p.returncode,
            "stderr": p.stderr.decode()[-3000:], "pid": os.getpid(), "fds": list(fds)}


def application(environ, start_response):
    path = environ["PATH_INFO"]
    query = dict(parse_qsl(environ.get("QUERY_STRING", "")))
    channel = query.get("c", "room")
    if path == "/pid":
        return _json(start_response, {"pid": os.getpid()})
    if path == "/orphan":
        subprocess.Popen(["sh", "-c", "sleep 0.2 &"]).wait()
        return _json(start_response, {"pid": os.getpid()})
    if path == "/sleep":
        if STATE and "tag" in query:
            with open(os.path.join(STATE, "started-" + query["tag"]), "w") as f:
                f.write(str(os.getpid()))
        seconds = float(query.get("s", "1"))
        time.sleep(seconds)
        return _json(start_response, {"pid": os.getpid(), "slept": seconds})
    if path == "/spin":  # pure Python, never leaving the interpreter: interruptible at once
        end = time.monotonic() + float(query.get("s", "1"))
        while time.monotonic() < end:
            pass
        return _json(start_response, {"pid": os.getpid(), "spun": True})
    if path == "/hold":
        start_response("200 OK", [("M0-Hold", "stream"), ("M0-Channel", channel), ("X-Pid", str(os.getpid()))])
        return []
    if path == "/publish":
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        return _json(start_response, {"id": m0pub.publish(channel, body), "pid": os.getpid()})
    if path == "/has-child-fds":
        return _json(start_response, {"child_fds": hasattr(m0pub, "child_fds"),
                                      "bus_write_fds": hasattr(m0pub, "bus_write_fds"), "pid": os.getpid()})
    if path == "/child":
        return _json(start_response, _child(channel, query.get("form", "numbered"), query.get("data", "")))
    return _json(start_response, {"error": "not found", "path": path}, "404 Not Found")
