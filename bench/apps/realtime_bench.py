"""The fan-out suite's application (bench/run fanout): plain WSGI, so the
figures are the server's. GET /events?c=NAME is held as an SSE stream of
channel NAME; POST /publish?c=NAME publishes the request body to it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from urllib.parse import parse_qs

from m0serve import m0pub


def application(environ: dict, start_response: Callable) -> Iterable[bytes]:
    channel = parse_qs(environ.get("QUERY_STRING", "")).get("c", ["bench"])[0]
    if environ["PATH_INFO"] == "/events":
        start_response("200 OK", [("M0-Hold", "stream"), ("M0-Channel", channel)])
        return [b""]
    if environ["PATH_INFO"] == "/publish" and environ["REQUEST_METHOD"] == "POST":
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        fid = m0pub.publish(channel, body)
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [str(fid).encode()]
    start_response("404 Not Found", [("Content-Type", "text/plain")])
    return [b"not found\n"]
