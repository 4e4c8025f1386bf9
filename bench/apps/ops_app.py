"""The operations scenario's application (bench/soak -suite ops): plain
WSGI, served by m0serve, gunicorn and granian alike.

GET / answers a short text. Under m0serve --realtime, GET /events?c=NAME is
held as an SSE stream of channel NAME and POST /publish?c=NAME publishes
the body to it, answering the frame's id; under any other server those two
answer 404.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from urllib.parse import parse_qs

try:
    from m0serve import m0pub
except ImportError:  # a peer's virtualenv: no realtime routes
    m0pub = None

HELLO = b"Hello, World!\n"


def application(environ: dict, start_response: Callable) -> Iterable[bytes]:
    path = environ["PATH_INFO"]
    if path == "/":
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(HELLO)))])
        return [HELLO]
    channel = parse_qs(environ.get("QUERY_STRING", "")).get("c", ["ops"])[0]
    if m0pub is not None and path == "/events":
        start_response("200 OK", [("M0-Hold", "stream"), ("M0-Channel", channel)])
        return [b""]
    if m0pub is not None and path == "/publish" and environ["REQUEST_METHOD"] == "POST":
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        fid = m0pub.publish(channel, body)
        out = str(fid).encode()
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(out)))])
        return [out]
    start_response("404 Not Found", [("Content-Type", "text/plain"), ("Content-Length", "10")])
    return [b"not found\n"]
