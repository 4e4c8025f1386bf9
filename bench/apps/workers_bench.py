"""The workers suite's realtime application (bench/xworkers):
plain WSGI under m0serve --workers 2 --realtime.

GET /events?c=NAME is held as an SSE stream of channel NAME.

POST /run?rate=R&frames=F&channels=C publishes F frames from the worker
that serves the request, R a second on a fixed schedule (frame i is due at
start + i/R; a late frame is sent at once, never skipped), frame i on
channel ch{i mod C} with the data {"t":UNIX_NANOS,"i":i,"n":i div C}: the
time it was published (read just before m0pub.publish), its index, and its
sequence number on its channel (0, 1, 2 ... on each channel, so a gap at a
client is a lost frame). The view answers when the last frame is out, with
JSON: the worker's pid, the frames published and refused, how long it took
and how late the schedule ran at worst.

GET /pid answers the serving worker's pid.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from urllib.parse import parse_qs

from m0serve import m0pub


def _run(rate: int, frames: int, channels: int) -> dict:
    names = [f"ch{c}" for c in range(channels)]
    period = 1_000_000_000 // rate
    refused = 0
    late_max = 0
    start = time.monotonic_ns()
    for i in range(frames):
        due = start + i * period
        now = time.monotonic_ns()
        if due > now:
            time.sleep((due - now) / 1e9)
        else:
            late_max = max(late_max, now - due)
        data = '{"t":%d,"i":%d,"n":%d}' % (time.time_ns(), i, i // channels)
        if m0pub.publish(names[i % channels], data) is False:
            refused += 1
    elapsed = time.monotonic_ns() - start
    return {
        "pid": os.getpid(),
        "published": frames - refused,
        "refused": refused,
        "seconds": elapsed / 1e9,
        "late_max_ms": late_max / 1e6,
    }


def application(environ: dict, start_response: Callable) -> Iterable[bytes]:
    query = parse_qs(environ.get("QUERY_STRING", ""))
    path = environ["PATH_INFO"]
    if path == "/events":
        channel = query.get("c", ["ch0"])[0]
        start_response("200 OK", [("M0-Hold", "stream"), ("M0-Channel", channel)])
        return [b""]
    if path == "/run" and environ["REQUEST_METHOD"] == "POST":
        rate = int(query.get("rate", ["1000"])[0])
        frames = int(query.get("frames", ["1000"])[0])
        channels = int(query.get("channels", ["100"])[0])
        body = json.dumps(_run(rate, frames, channels)).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]
    if path == "/pid":
        body = str(os.getpid()).encode()
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
        return [body]
    start_response("404 Not Found", [("Content-Type", "text/plain")])
    return [b"not found\n"]
